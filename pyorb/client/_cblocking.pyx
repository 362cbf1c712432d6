# cython: language_level=3, boundscheck=False, wraparound=False
"""A blocking call in C: the compiled twins of ``pyorb.client.blocking``'s ``BlockingConnection.call``,
``_deadline_request`` and ``BlockingClient._call``.

A thread's blocking call holds the interpreter lock for everything but its
two socket calls, so other threads wait while it runs Python between them.
The Python call spends a dozen frames there (the writer, the core's encoder,
the deadline's context, the send, the wait for the reply, the receive and
the core's events).  For the common call, once the connection's code sets
are chosen (GIOP 1.2, a bytes object key, no interceptor contexts, a
connection that does not fragment), this ``call`` writes the request and
its deadline's context into one buffer in C, sends it and reads the reply
through the core (whose per-read methods are themselves C twins) without a
Python frame of its own.  Every other call runs the Python original; every
failure (a send or receive that fails or times out, a protocol error, an
event that ends the connection) is handed to the original's methods, so
errors and their messages come from one place.  ``_call`` (the client's
hops, LOCATION_FORWARD included) takes an open connection straight from the
client's table instead of through three Python frames.
tests/test_blocking_twins.py checks each twin gives the same bytes, replies
and errors as its original.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset

import time as _time

from pyorb.client import blocking as _blocking
from pyorb.client import errors as _errors
from pyorb.client._cwriter import numbered_body as _numbered_body
from pyorb.giop import fast12 as _fast12
from pyorb.giop import policies as _policies
from pyorb.giop.errors import ProtocolError as _ProtocolError
from pyorb.giop.messages import GIOP_1_2, NEED_DATA, SC_INVOCATION_POLICIES, SYNC_NONE, SYNC_WITH_TARGET, Reply

# Read before the twins replace them: the originals this module falls back to.
_original_call = _blocking.BlockingConnection.call
_py_deadline_request = _blocking._deadline_request
_StaleConnection = _blocking.StaleConnection
_RECV_SIZE = _blocking._RECV_SIZE
_log = _blocking.log
_timed_out = _errors.timed_out
_monotonic = _time.monotonic
_now = _time.time
_Reply = Reply
# Bound after pyorb.giop's twin switch ran: the C encoder when the accelerator is in use.
_encode = _fast12.encode_request_12
_NEED_DATA = NEED_DATA
_GIOP_1_2 = GIOP_1_2

cdef uint32_t _CONTEXT_ID = SC_INVOCATION_POLICIES
cdef uint32_t _RELATIVE = _policies.RELATIVE_RT_TIMEOUT_POLICY_TYPE
cdef uint32_t _END = _policies.REQUEST_END_TIME_POLICY_TYPE
cdef int64_t _EPOCH = _policies.UTC_EPOCH_OFFSET
cdef double _TICKS = _policies._TICKS
cdef Py_ssize_t _DEADLINE_SIZE = _policies._DEADLINE_SIZE  # 64
# Ticks past which the Python original decides (and raises what struct raises): far beyond any timeout.
cdef double _MAX_TICKS = 2.0 ** 60


cdef inline void _put_u32(uint8_t* p, uint32_t v, bint little) noexcept nogil:
    if little:
        p[0] = v & 0xFF; p[1] = (v >> 8) & 0xFF; p[2] = (v >> 16) & 0xFF; p[3] = v >> 24
    else:
        p[0] = v >> 24; p[1] = (v >> 16) & 0xFF; p[2] = (v >> 8) & 0xFF; p[3] = v & 0xFF


cdef inline void _put_u64(uint8_t* p, uint64_t v, bint little) noexcept nogil:
    if little:
        _put_u32(p, <uint32_t>v, 1)
        _put_u32(p + 4, <uint32_t>(v >> 32), 1)
    else:
        _put_u32(p, <uint32_t>(v >> 32), 0)
        _put_u32(p + 4, <uint32_t>v, 0)


def _deadline_request(request_id, response_flags, object_key, operation, body, little_endian, timeout, now):
    """The compiled twin of ``blocking._deadline_request``."""
    if (type(object_key) is not bytes or type(operation) is not str or type(body) is not bytes
            or type(request_id) is not int or not 0 <= request_id <= 0xFFFFFFFF
            or type(response_flags) is not int or not 0 <= response_flags <= 255
            or type(little_endian) is not bool or type(timeout) is not float or type(now) is not float
            or not (-_MAX_TICKS < timeout * _TICKS < _MAX_TICKS) or not (0.0 <= now * _TICKS < _MAX_TICKS)
            or len(object_key) > 0xFFFFFF or len(body) > 0xFFFFFF00 or len(operation) > 0xFFFFFF):
        return _py_deadline_request(request_id, response_flags, object_key, operation, body, little_endian,
                                    timeout, now)
    cdef bint little = little_endian
    cdef double t = timeout
    cdef double n = now
    # As int(x * _TICKS) in Python: the same double product, truncated toward zero.
    cdef int64_t ticks = <int64_t>(t * _TICKS)
    if ticks < 0:
        ticks = 0
    cdef uint64_t end = <uint64_t>(_EPOCH + <int64_t>(n * _TICKS) + ticks)
    # The request without contexts and body: its header, key and operation, then an empty context list.
    bare = _encode(request_id, response_flags, object_key, operation, b"", little_endian)
    cdef Py_ssize_t count_at = PyBytes_GET_SIZE(bare) - 4
    cdef Py_ssize_t body_len = PyBytes_GET_SIZE(body)
    cdef Py_ssize_t data_at = count_at + 12
    cdef Py_ssize_t end_at = data_at + _DEADLINE_SIZE
    if body_len:
        end_at += -end_at & 7
    out = PyBytes_FromStringAndSize(NULL, end_at + body_len)
    cdef uint8_t* p = <uint8_t*>PyBytes_AS_STRING(out)
    memset(p, 0, end_at)
    memcpy(p, PyBytes_AS_STRING(bare), count_at)
    _put_u32(p + 8, <uint32_t>(end_at + body_len - 12), little)
    _put_u32(p + count_at, 1, little)
    _put_u32(p + count_at + 4, _CONTEXT_ID, little)
    _put_u32(p + count_at + 8, <uint32_t>_DEADLINE_SIZE, little)
    # The context's encapsulation: its own byte order flag, then two policies (see policies.deadline_context).
    cdef uint8_t* d = p + data_at
    cdef bint inner = little
    d[0] = 1 if inner else 0
    _put_u32(d + 4, 2, inner)
    _put_u32(d + 8, _RELATIVE, inner)
    _put_u32(d + 12, 16, inner)
    d[16] = d[0]
    _put_u64(d + 24, <uint64_t>ticks, inner)
    _put_u32(d + 32, _END, inner)
    _put_u32(d + 36, 24, inner)
    d[40] = d[0]
    _put_u64(d + 48, end, inner)
    if body_len:
        memcpy(p + end_at, PyBytes_AS_STRING(body), body_len)
    return out


def call(self, op, args, route, deadline, contexts=(), timeout=None):
    """The compiled twin of :meth:`pyorb.client.blocking.BlockingConnection.call`."""
    writer = self._writer
    core = self._core
    key = route.key
    version = route.version
    if (contexts or writer._chosen is not True or type(key) is not bytes
            or not (version is _GIOP_1_2 or version == _GIOP_1_2) or core.max_fragment_size is not None):
        return _original_call(self, op, args, route, deadline, contexts, timeout)
    cdef double left = 0.0
    lock = self._lock
    if deadline is None:
        acquired = lock.acquire()
    else:
        left = deadline - _monotonic()
        acquired = lock.acquire(True, left if left > 0 else 0)
    if not acquired:
        raise _timed_out(op.name, route, timeout, sent=False)  # other callers held the connection
    try:
        if not self.is_open:
            raise _StaleConnection()
        name = op.name
        self._op = name
        self._route = route
        self._timeout = timeout
        if deadline is not None:
            left = deadline - _monotonic()
            if left <= 0:
                raise _timed_out(name, route, timeout, sent=False)  # before the writer counts a request
            now = _now()
        rid, body = _numbered_body(writer, op, args)
        le = writer.little_endian
        oneway = op.oneway
        flags = SYNC_NONE if oneway else SYNC_WITH_TARGET
        if deadline is None:
            data = _encode(rid, flags, key, name, body, le)  # core.request_12 for a connection that does not fragment
        else:
            data = _deadline_request(rid, flags, key, name, body, le, left, now)
        sock = self._sock
        try:
            if deadline is None:
                sock.settimeout(None)
            else:
                left = deadline - _monotonic()
                sock.settimeout(left if left > 0.001 else 0.001)
            sock.sendall(data)
        except OSError as exc:
            self._send_failed(exc)
        if oneway:
            return None
        while True:
            try:
                event = core.next_event()
            except _ProtocolError as exc:
                self._protocol_error(exc)
            if event is _NEED_DATA:
                if core.in_progress:
                    self._receive(rid, deadline)  # part of a message read: the read timeout may apply
                    continue
                try:
                    if deadline is None:
                        sock.settimeout(None)
                    else:
                        left = deadline - _monotonic()
                        if left <= 0:
                            raise TimeoutError
                        sock.settimeout(left)
                    received = sock.recv(_RECV_SIZE)
                except OSError as exc:
                    self._receive_failed(exc, rid, False)
                core.receive_data(received)
            elif type(event) is _Reply:
                if event.request_id == rid:
                    return event
                _log.debug("late or unknown reply %d dropped", event.request_id)
            else:
                self._connection_event(event)
    finally:
        lock.release()


_original_client_call = _blocking.BlockingClient._call
_reply_result = _blocking.reply_result
_CallResult = _blocking.CallResult
_LocationForward = _blocking.LocationForward


def _call(self, op, args, route, clock, intercepted, target):
    """The compiled twin of :meth:`pyorb.client.blocking.BlockingClient._call`: a call without
    interceptors on an open connection goes straight to it; anything else runs the original's steps."""
    if intercepted is not None:
        return _original_client_call(self, op, args, route, clock, intercepted, target)
    deadline, timeout = clock
    max_forwards = self.config.max_forwards
    for _hop in range(max_forwards + 1):
        if route is None:
            raise _errors.no_route(op.name, target, self._tls is not False)
        with self._lock:
            if self._closed:
                raise _errors.client_closed()
            conn = self._conns.get(route.endpoint)
        if conn is not None and conn.is_open:
            reached = route
            try:
                reply = conn.call(op, args, route, deadline, (), timeout)
            except _StaleConnection:
                # As the original's second attempt: another caller lost it while we waited.
                conn, reached = self._reachable(route, clock, op.name)
                try:
                    reply = conn.call(op, args, reached, deadline, (), timeout)
                except _StaleConnection:
                    raise _errors.not_sent(op.name, route, "closed twice while the call waited for it") from None
            core = conn._core
        else:
            reply, core, reached = self._request(route, op, args, clock, ())
        if reply is None:
            return _CallResult(None, 0)
        try:
            return _CallResult(_reply_result(op, reply, self.from_objref, self.value_bounds, core.char_set,
                                             core.wide_giop11, reached, target), len(reply.body))
        except _LocationForward as fwd:
            target = fwd.target
            route = self.route(target)
    raise _errors.too_many_forwards(op.name, max_forwards)
