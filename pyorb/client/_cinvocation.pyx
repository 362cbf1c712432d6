# cython: language_level=3, boundscheck=False, wraparound=False
"""A call sent and its reply delivered in C: the compiled twins of ``ClientConnection.start``,
``ClientConnection.message_received`` and ``Invocation.complete``.

Every reply a client reads passes through both, and in Python the common
one (NO_EXCEPTION, no interceptor, no object group, a result of no value
or of one value omniORB reads straight from the body) costs four frames
(the connection's ``message_received``, the call's ``complete``, the
operation's ``reply_value`` and the result codec's ``unpack``) around one
omniORB unmarshal.  These twins deliver it in one; every other message
and reply, and a body that does not decode, goes to the Python originals,
so errors, their logging and every other case come from one place.
tests/test_invocation_twins.py checks that both leave a call with the same
outcome and a connection with the same pending calls.

``start`` sends the common call (an open connection of exactly
``ClientConnection``, a two-way call of exactly ``Invocation`` with no
interceptor, no bidirectional offer waiting, room under the pending-call
limit) with the connection's, the route's and the call's slots read and
written at their offsets, and its time left in an INVOCATION_POLICIES
context if it has a deadline; it hands every other call to the original.
``expire_in`` puts a call in the slot of the calls that time out with it
(a new slot earlier than the loop's timer is armed for: the original, which
arms it), and a reply that completes a timed call takes it out of its slot here.
``invoke`` makes and sends the call of a client of exactly ``Client``
without interceptors, outside servant code, to a route outside an object
group, the ``Invocation`` made with its slots filled here.
tests/test_start_twin.py checks that ``invoke``, ``start`` and ``expire_in``
write the same bytes and leave the same state as their originals.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.math cimport ceil
from libc.string cimport memcpy, memset

from pyorb.client import connection as _connection
from pyorb.client import invocation as _invocation
from omniORB import CORBA

from pyorb.client.calls import Route
from pyorb.client.deadlines import Deadlines, RESOLUTION
from pyorb.giop import policies as _policies
from pyorb.giop._cframing cimport _get, _new_context, _put, _slot_offsets
from pyorb.giop.codesets import CS_UTF8
from pyorb.giop.messages import SC_INVOCATION_POLICIES, Reply, ReplyStatus
from pyorb.marshal.body import BodyCodec, Operation
from pyorb.marshal.orb import cdr_unmarshal

# The originals: every case but the common one.
_original_message_received = _connection.ClientConnection.message_received
_original_complete = _invocation.Invocation.complete
_original_start = _connection.ClientConnection.start
_original_expire_in = _invocation.Invocation.expire_in
cdef object _Reply = Reply
cdef object _NO_EXCEPTION = ReplyStatus.NO_EXCEPTION
cdef object _UTF8 = CS_UTF8


# The slots _settle reads, at their offsets for objects of exactly these classes
# (a generic attribute lookup from C costs about a hundred instructions).
cdef object _Invocation = _invocation.Invocation
cdef tuple _REPLY = _slot_offsets(Reply, ("reply_status", "body", "body_offset", "fragment_starts", "little_endian"))
cdef tuple _CALL = _slot_offsets(_Invocation, ("op", "conn", "intercepted", "member", "deadlines"))
cdef tuple _OPERATION = _slot_offsets(Operation, ("_result_shape", "results"))
cdef tuple _CODEC = _slot_offsets(BodyCodec, ("_one", "_strings"))
cdef bint _KNOWN = not (_REPLY is None or _CALL is None or _OPERATION is None or _CODEC is None)
cdef Py_ssize_t _STATUS, _BODY, _BODY_OFFSET, _FRAGMENTS, _LITTLE, _OP, _CONN, _INTERCEPTED, _MEMBER, _DEADLINES
cdef Py_ssize_t _SHAPE, _RESULTS, _ONE, _STRINGS
if _KNOWN:
    _STATUS, _BODY, _BODY_OFFSET, _FRAGMENTS, _LITTLE = _REPLY
    _OP, _CONN, _INTERCEPTED, _MEMBER, _DEADLINES = _CALL
    _SHAPE, _RESULTS = _OPERATION
    _ONE, _STRINGS = _CODEC


cdef bint _settle(inv, reply) except -1:
    """Complete ``inv`` with a common ``reply``; False if it is not one (the original's way)."""
    cdef bint fast = _KNOWN and type(inv) is _Invocation and type(reply) is _Reply
    if (_get(reply, fast, _STATUS, "reply_status") is not _NO_EXCEPTION
            or _get(inv, fast, _INTERCEPTED, "intercepted") is not None
            or _get(inv, fast, _MEMBER, "member") is not None):
        return False
    conn = _get(inv, fast, _CONN, "conn")
    if conn is None:
        return False
    op = _get(inv, fast, _OP, "op")
    cdef bint fast_op = fast and type(op) is Operation
    shape = _get(op, fast_op, _SHAPE, "_result_shape")
    if shape == 0:
        value = None
    elif shape == 1:
        results = _get(op, fast_op, _RESULTS, "results")
        fast_codec = fast_op and type(results) is BodyCodec
        one = _get(results, fast_codec, _ONE, "_one")
        if (one is None or _get(reply, fast, _BODY_OFFSET, "body_offset") & 7
                or _get(reply, fast, _FRAGMENTS, "fragment_starts")
                or (_get(results, fast_codec, _STRINGS, "_strings") and conn.core.char_set != _UTF8)):
            return False
        try:
            value = cdr_unmarshal(one, _get(reply, fast, _BODY, "body"), _get(reply, fast, _LITTLE, "little_endian"))
        except Exception:  # the original reads it again, logs it and fails the call with MARSHAL
            return False
    else:
        return False
    deadlines = _get(inv, fast, _DEADLINES, "deadlines")
    if deadlines is not None:  # else nothing to release: the connection dropped the call
        if fast and _TIMED_KNOWN and type(deadlines) is _Deadlines:
            _release(inv, deadlines, conn)
        else:
            inv.release()
    inv.set_result(value)
    return True


def complete(self, reply):
    """As :meth:`pyorb.client.invocation.Invocation.complete`."""
    if self.done():
        return
    if not _settle(self, reply):
        _original_complete(self, reply)


def message_received(self, message):
    """As :meth:`pyorb.client.connection.ClientConnection.message_received`."""
    if type(message) is not _Reply:
        _original_message_received(self, message)
        return
    inv = self.pending.pop(message.request_id, None)
    if inv is None:  # late or unknown: the original says so in its log
        _original_message_received(self, message)
        return
    # A call of a kind with its own complete, or a reply that is not a common one: the general way.
    if type(inv).complete is not complete or inv.done() or not _settle(inv, message):
        inv.complete(message)


# start's reads and writes: the connection's slots (GIOPProtocol's), the route's and the call's.
cdef object _Connection = _connection.ClientConnection
cdef object _Route = Route
cdef object _SystemException = CORBA.SystemException
cdef tuple _CONNECTION = _slot_offsets(_Connection, ("is_open", "config", "loop"))
cdef tuple _ROUTE = _slot_offsets(Route, ("key", "version", "code_sets", "orb_type"))
cdef tuple _SENT = _slot_offsets(_Invocation, ("args", "route", "request_id"))
cdef tuple _ONEWAY = _slot_offsets(Operation, ("oneway",))
cdef bint _START_KNOWN = _KNOWN and not (_CONNECTION is None or _ROUTE is None or _SENT is None or _ONEWAY is None)
cdef Py_ssize_t _C_OPEN, _C_CONFIG, _C_LOOP, _R_KEY, _R_VERSION, _R_CODE_SETS, _R_ORB_TYPE, _ARGS, _ROUTE_OF, _REQUEST_ID, _O_ONEWAY
if _START_KNOWN:
    _C_OPEN, _C_CONFIG, _C_LOOP = _CONNECTION
    _R_KEY, _R_VERSION, _R_CODE_SETS, _R_ORB_TYPE = _ROUTE
    _ARGS, _ROUTE_OF, _REQUEST_ID = _SENT
    _O_ONEWAY, = _ONEWAY


def start(self, inv, route):
    """As :meth:`pyorb.client.connection.ClientConnection.start`."""
    if not (_START_KNOWN and type(self) is _Connection and type(inv) is _Invocation and type(route) is _Route
            and _get(self, True, _C_OPEN, "is_open") and _get(inv, True, _INTERCEPTED, "intercepted") is None):
        return _original_start(self, inv, route)
    deadlines = _get(inv, True, _DEADLINES, "deadlines")
    if deadlines is not None and not _TIMED_KNOWN:
        return _original_start(self, inv, route)
    op = _get(inv, True, _OP, "op")
    if type(op) is not Operation or _get(op, True, _O_ONEWAY, "oneway"):
        return _original_start(self, inv, route)
    pending = self.pending
    if len(pending) >= _get(self, True, _C_CONFIG, "config").max_pending_calls or self.offer is not None:
        return _original_start(self, inv, route)
    writer = self.writer
    try:
        if deadlines is None:
            contexts = ()
        else:  # its time left travels with it: Deadlines.time_left, and the clock the original reads
            left = _get(inv, True, _DEADLINE, "deadline") * RESOLUTION - _get(self, True, _C_LOOP, "loop").time()
            contexts = (_deadline_context(left, _connection.time.time(), writer.little_endian),)
        rid, data = writer.request(op, _get(inv, True, _ARGS, "args"), _get(route, True, _R_KEY, "key"),
                                   _get(route, True, _R_VERSION, "version"),
                                   _get(route, True, _R_CODE_SETS, "code_sets"),
                                   _get(route, True, _R_ORB_TYPE, "orb_type"), contexts)
    except _SystemException as exc:
        inv.fail(exc)
        return
    _put(inv, True, _CONN, "conn", self)
    _put(inv, True, _ROUTE_OF, "route", route)
    _put(inv, True, _REQUEST_ID, "request_id", rid)
    pending[rid] = inv
    self.send(data)


# A call's deadline: its slot in the loop's Deadlines (pyorb.client.deadlines), read and written here.
cdef object _Deadlines = Deadlines
cdef tuple _DEADLINE_SLOTS = _slot_offsets(Deadlines, ("_slots", "_timer", "_armed"))
cdef tuple _TIMED = _slot_offsets(_Invocation, ("deadline", "timeout"))
cdef bint _TIMED_KNOWN = _START_KNOWN and not (_DEADLINE_SLOTS is None or _TIMED is None)
cdef Py_ssize_t _D_SLOTS, _D_TIMER, _D_ARMED, _DEADLINE, _TIMEOUT
if _TIMED_KNOWN:
    _D_SLOTS, _D_TIMER, _D_ARMED = _DEADLINE_SLOTS
    _DEADLINE, _TIMEOUT = _TIMED
cdef object _ceil = __import__("math").ceil
cdef double _RESOLUTION_F = RESOLUTION
cdef object _TICKS = _policies._TICKS
cdef object _EPOCH = _policies.UTC_EPOCH_OFFSET
cdef object _RELATIVE = _policies.RELATIVE_RT_TIMEOUT_POLICY_TYPE
cdef object _END_TIME = _policies.REQUEST_END_TIME_POLICY_TYPE
cdef object _PACK_LE = _policies._PACK_LE
cdef object _PACK_BE = _policies._PACK_BE
cdef object _POLICIES = SC_INVOCATION_POLICIES


cdef bytes _RELATIVE_LE = _policies._RELATIVE_HEAD_LE
cdef bytes _RELATIVE_BE = _policies._RELATIVE_HEAD_BE
cdef bytes _END_LE = _policies._END_HEAD_LE
cdef bytes _END_BE = _policies._END_HEAD_BE
cdef long long _EPOCH_TICKS = _EPOCH
# The layout the C path writes: the fixed heads, each tick count, eight bytes of zeros.
cdef bint _LAYOUT_KNOWN = (_policies._DEADLINE_SIZE == 64 and _policies._TICKS_AT == 24
                           and _policies._END_TYPE_AT == 32 and _policies._END_AT == 48 and _TICKS == 10_000_000
                           and len(_RELATIVE_LE) == len(_RELATIVE_BE) == 24 and len(_END_LE) == len(_END_BE) == 16)


cdef inline void _put_u64(char* p, unsigned long long value, bint little_endian):
    cdef int i
    for i in range(8):
        p[i if little_endian else 7 - i] = <char>(value & 0xff)
        value >>= 8


cdef object _deadline_context(timeout, now, little_endian):
    """``pyorb.giop.policies.deadline_context(timeout, now, little_endian)`` without its frame:
    in C for the floats a timed call passes (the same double products, truncated as ``int()``
    truncates), else the same arithmetic on the same objects."""
    cdef double ticks_f, now_f
    cdef long long ticks
    cdef char* p
    cdef bint le
    if _LAYOUT_KNOWN and type(timeout) is float and type(now) is float:
        ticks_f = <double>timeout * 1e7
        now_f = <double>now * 1e7
        if -1e18 < ticks_f < 1e18 and 0.0 <= now_f < 1e18:  # every sum below fits a long long
            ticks = <long long>ticks_f
            if ticks < 0:
                ticks = 0
            le = True if little_endian else False
            data = PyBytes_FromStringAndSize(NULL, 64)
            p = PyBytes_AS_STRING(data)
            memcpy(p, <const char*>(_RELATIVE_LE if le else _RELATIVE_BE), 24)
            _put_u64(p + 24, <unsigned long long>ticks, le)
            memcpy(p + 32, <const char*>(_END_LE if le else _END_BE), 16)
            _put_u64(p + 48, <unsigned long long>(_EPOCH_TICKS + <long long>now_f + ticks), le)
            memset(p + 56, 0, 8)
            return _new_context(_POLICIES, data)
    ticks_o = int(timeout * _TICKS)
    if ticks_o < 0:
        ticks_o = 0
    end = _EPOCH + int(now * _TICKS) + ticks_o
    if little_endian:
        data = _PACK_LE(1, 2, _RELATIVE, 16, 1, ticks_o, _END_TIME, 24, 1, end, 0, 0, 0)
    else:
        data = _PACK_BE(0, 2, _RELATIVE, 16, 0, ticks_o, _END_TIME, 24, 0, end, 0, 0, 0)
    return _new_context(_POLICIES, data)


cdef int _release(inv, deadlines, conn) except -1:
    """``inv.release()`` for a call of exactly ``Invocation`` with ``deadlines`` of exactly ``Deadlines``."""
    _put(inv, True, _DEADLINES, "deadlines", None)
    number = _get(inv, True, _DEADLINE, "deadline")
    slots = _get(deadlines, True, _D_SLOTS, "_slots")  # Deadlines.remove
    slot = slots.get(number)
    if slot is not None and slot.pop(inv, 0) is None and not slot:
        del slots[number]
    request_id = _get(inv, True, _REQUEST_ID, "request_id")
    if conn.pending.pop(request_id, None) is not None:
        conn.cancel_request(request_id)
    return 0


def expire_in(self, timeout, loop, deadlines=None):
    """As :meth:`pyorb.client.invocation.Invocation.expire_in`."""
    cdef double slot_f
    if not (_TIMED_KNOWN and type(self) is _Invocation and type(deadlines) is _Deadlines):
        return _original_expire_in(self, timeout, loop, deadlines)
    now = loop.time()
    if type(now) is float and type(timeout) is float:  # Deadlines.add's arithmetic, on the same doubles
        slot_f = ceil((<double>now + <double>timeout) / _RESOLUTION_F)
        number = <long long>slot_f if -1e15 < slot_f < 1e15 else _ceil((now + timeout) / RESOLUTION)
    else:
        number = _ceil((now + timeout) / RESOLUTION)
    slots = _get(deadlines, True, _D_SLOTS, "_slots")
    slot = slots.get(number)
    if slot is None:
        # A new slot: the original arms the timer for it if it is the earliest; one the armed
        # timer will reach is only made (a caller's next call, once its last one left its slot).
        if _get(deadlines, True, _D_TIMER, "_timer") is None or number < _get(deadlines, True, _D_ARMED, "_armed"):
            return _original_expire_in(self, timeout, loop, deadlines)
        slot = slots[number] = {}
    slot[self] = None
    _put(self, True, _DEADLINES, "deadlines", deadlines)
    _put(self, True, _TIMEOUT, "timeout", timeout)
    _put(self, True, _DEADLINE, "deadline", number)


# Client.invoke: a call made where no request is being served, by a client of exactly Client without
# interceptors, to a route of exactly Route outside an object group.
_future_init = _invocation._future_init
cdef object _new_call = _Invocation.__new__
cdef tuple _CALL_INIT = _slot_offsets(_Invocation, ("args", "request_id", "forwards", "caller", "target", "resent",
                                                    "tried", "idempotent", "sent_at"))
cdef tuple _GROUP = _slot_offsets(Route, ("endpoint", "group"))
cdef bint _INVOKE_KNOWN = _TIMED_KNOWN and not (_CALL_INIT is None or _GROUP is None)
cdef Py_ssize_t _I_ARGS, _I_REQUEST_ID, _I_FORWARDS, _I_CALLER, _I_TARGET, _I_RESENT, _I_TRIED, _I_IDEMPOTENT
cdef Py_ssize_t _I_SENT_AT, _R_ENDPOINT, _R_GROUP
if _INVOKE_KNOWN:
    (_I_ARGS, _I_REQUEST_ID, _I_FORWARDS, _I_CALLER, _I_TARGET, _I_RESENT, _I_TRIED, _I_IDEMPOTENT,
     _I_SENT_AT) = _CALL_INIT
    _R_ENDPOINT, _R_GROUP = _GROUP
cdef object _ZERO_TIME = 0.0
cdef object _get_running_loop = __import__("asyncio").get_running_loop
# Bound on first use: pyorb.client.client imports this module's package first.
cdef object _Client = None
cdef object _SERVING = None
cdef object _original_invoke = None


cdef object _new_invocation(op, args, caller, target):
    """``Invocation(op, args, None, caller, target)``, its slots filled here."""
    inv = _new_call(_Invocation)
    _future_init(inv)
    _put(inv, True, _OP, "op", op)
    _put(inv, True, _I_ARGS, "args", args)
    _put(inv, True, _CONN, "conn", None)
    _put(inv, True, _I_REQUEST_ID, "request_id", 0)
    _put(inv, True, _DEADLINES, "deadlines", None)
    _put(inv, True, _DEADLINE, "deadline", 0)
    _put(inv, True, _I_FORWARDS, "forwards", 0)
    _put(inv, True, _I_CALLER, "caller", caller)
    _put(inv, True, _I_TARGET, "target", target)
    _put(inv, True, _I_RESENT, "resent", False)
    _put(inv, True, _INTERCEPTED, "intercepted", None)
    _put(inv, True, _MEMBER, "member", None)
    _put(inv, True, _I_TRIED, "tried", None)
    _put(inv, True, _I_IDEMPOTENT, "idempotent", False)
    _put(inv, True, _I_SENT_AT, "sent_at", _ZERO_TIME)
    return inv


def invoke(self, target, op, args, timeout, route=None, idempotent=False):
    """As :meth:`pyorb.client.client.Client.invoke`."""
    global _Client, _SERVING, _original_invoke
    if _Client is None:
        from pyorb import _accelerator, request_context
        from pyorb.client import client
        _Client, _SERVING = client.Client, request_context.SERVING
        _original_invoke = _accelerator.original("pyorb.client.client.Client.invoke")
    if not (_INVOKE_KNOWN and type(self) is _Client and not idempotent and type(route) is _Route
            and _get(route, True, _R_GROUP, "group") is None and _SERVING.get(None) is None
            and not self.interceptors):
        return _original_invoke(self, target, op, args, timeout, route, idempotent)
    loop = _get_running_loop()
    inv = _new_invocation(op, args, self, target)
    if timeout is not None:
        deadlines = self._deadlines
        if deadlines is None or self._deadlines_loop is not loop:  # Deadlines.of is a weak-dict lookup
            deadlines = self._deadlines = _Deadlines.of(loop)
            self._deadlines_loop = loop
        expire_in(inv, timeout, loop, deadlines)
    conn = self._conns.get(_get(route, True, _R_ENDPOINT, "endpoint"))
    if conn is not None and conn.is_open:  # Client._send for a route outside a group
        conn.start(inv, route)
    else:
        self._send(inv, route)
    return inv
