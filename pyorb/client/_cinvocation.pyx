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
deadline and no interceptor, no bidirectional offer waiting, room under
the pending-call limit) with the connection's, the route's and the call's
slots read and written at their offsets, and hands every other call to
the original; tests/test_start_twin.py checks that both write the same
bytes and leave the same state.
"""

from pyorb.client import connection as _connection
from pyorb.client import invocation as _invocation
from omniORB import CORBA

from pyorb.client.calls import Route
from pyorb.giop._cframing cimport _get, _put, _slot_offsets
from pyorb.giop.codesets import CS_UTF8
from pyorb.giop.messages import Reply, ReplyStatus
from pyorb.marshal.body import BodyCodec, Operation
from pyorb.marshal.orb import cdr_unmarshal

# The originals: every case but the common one.
_original_message_received = _connection.ClientConnection.message_received
_original_complete = _invocation.Invocation.complete
_original_start = _connection.ClientConnection.start
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
    if _get(inv, fast, _DEADLINES, "deadlines") is not None:  # else nothing to release: the connection dropped the call
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
cdef tuple _CONNECTION = _slot_offsets(_Connection, ("is_open", "config"))
cdef tuple _ROUTE = _slot_offsets(Route, ("key", "version", "code_sets", "orb_type"))
cdef tuple _SENT = _slot_offsets(_Invocation, ("args", "route", "request_id"))
cdef tuple _ONEWAY = _slot_offsets(Operation, ("oneway",))
cdef bint _START_KNOWN = _KNOWN and not (_CONNECTION is None or _ROUTE is None or _SENT is None or _ONEWAY is None)
cdef Py_ssize_t _C_OPEN, _C_CONFIG, _R_KEY, _R_VERSION, _R_CODE_SETS, _R_ORB_TYPE, _ARGS, _ROUTE_OF, _REQUEST_ID, _O_ONEWAY
if _START_KNOWN:
    _C_OPEN, _C_CONFIG = _CONNECTION
    _R_KEY, _R_VERSION, _R_CODE_SETS, _R_ORB_TYPE = _ROUTE
    _ARGS, _ROUTE_OF, _REQUEST_ID = _SENT
    _O_ONEWAY, = _ONEWAY


def start(self, inv, route):
    """As :meth:`pyorb.client.connection.ClientConnection.start`."""
    if not (_START_KNOWN and type(self) is _Connection and type(inv) is _Invocation and type(route) is _Route
            and _get(self, True, _C_OPEN, "is_open") and _get(inv, True, _INTERCEPTED, "intercepted") is None
            and _get(inv, True, _DEADLINES, "deadlines") is None):
        return _original_start(self, inv, route)
    op = _get(inv, True, _OP, "op")
    if type(op) is not Operation or _get(op, True, _O_ONEWAY, "oneway"):
        return _original_start(self, inv, route)
    pending = self.pending
    if len(pending) >= _get(self, True, _C_CONFIG, "config").max_pending_calls or self.offer is not None:
        return _original_start(self, inv, route)
    try:
        rid, data = self.writer.request(op, _get(inv, True, _ARGS, "args"), _get(route, True, _R_KEY, "key"),
                                        _get(route, True, _R_VERSION, "version"),
                                        _get(route, True, _R_CODE_SETS, "code_sets"),
                                        _get(route, True, _R_ORB_TYPE, "orb_type"), ())
    except _SystemException as exc:
        inv.fail(exc)
        return
    _put(inv, True, _CONN, "conn", self)
    _put(inv, True, _ROUTE_OF, "route", route)
    _put(inv, True, _REQUEST_ID, "request_id", rid)
    pending[rid] = inv
    self.send(data)
