# cython: language_level=3, boundscheck=False, wraparound=False
"""A server connection's requests in C: the compiled twin of ``RequestHandler.message_received``.

Every request a server reads passes ``message_received``, ``_request`` and
``serve`` before its servant runs: in Python three frames (four with
``Request.response_expected``) of checks that, for the common request, all
pass.  This twin makes the same checks in one, reading the slots of the
handler, the request, the binding, the route and its recorder at their
offsets.  A plain synchronous servant it answers itself, as
``_answer_inline`` does (with the client's deadline, as
``_answer_inline_until`` does), and lets ``pyorb.current()`` find the
request through ``serve_inline`` where the original has its frame; every
other request goes on to the method the originals would call next:
``serve``, or, for a message other than a request or a request in another
addressing mode, the original ``message_received``.  A request of a route
with admission control it asks that control first, as ``serve`` would, and
answers a refusal whose reply was encoded before (``_overloaded``'s common
case) with that reply under the request's id; an admitted one goes to
``serve``, told it was admitted.  Every error, other refusal and strategy
is still the Python code's (an answer that does not marshal goes to
``_late_call``'s Call).  tests/test_request_twin.py checks that
both answer the same requests with the same bytes, make the same servant
calls (with what servant code sees of its request) and leave the same
statistics.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.pythread cimport PyThread_get_thread_ident
from libc.string cimport memcmp
from time import monotonic as _monotonic, perf_counter as _perf_counter

from pyorb.giop._cframing cimport _get, _put, _slot_offsets
from pyorb.giop.codesets import CHAR_CONVERSIONS
from pyorb.giop.connection import GIOPConnection
from pyorb.giop import policies as _policies
from pyorb.giop.messages import GIOP_1_2, SC_INVOCATION_POLICIES, Request, ServiceContext
from pyorb.marshal.body import Operation
from pyorb.server import requests as _requests
from pyorb.server.adapter import Binding, Route
from pyorb.request_context import serve_inline
from pyorb.server.call.dispatch import servant_raised as _servant_raised
from pyorb.server.call.reply import plain_reply_12 as _plain_reply_12
from pyorb.server.call.servant import OpEntry, Style
from pyorb.server.call.stats import Recorder

# The originals, taken while the class still holds them (the twin declaration
# at the end of pyorb.server.requests imports this module).
cdef object _Handler = _requests.RequestHandler
_original = _Handler.message_received
cdef object _serve = _Handler.serve
cdef object _not_here = _Handler._not_here
cdef object _intercept = _Handler._intercept
cdef object _client_deadline = _Handler._client_deadline
cdef object _codeset_incompatible = _Handler._codeset_incompatible
cdef object _late_call = _Handler._late_call
cdef object _overloaded = _Handler._overloaded
# The methods the originals call on the handler, past message_received: a class
# that overrides one of them runs the originals whole.
cdef tuple _CALLED = ("_request", "serve", "_answer_inline", "_not_here", "_intercept", "_client_deadline",
                      "_codeset_incompatible", "_answer_inline_until", "_late_call", "_overloaded")
cdef tuple _CALLED_HERE = tuple(getattr(_Handler, name) for name in _CALLED)

cdef object _Request = Request
cdef object _Serving = _requests._Serving
cdef object _new_serving = _requests._new_serving
cdef object _enter_serving = _requests._serve  # SERVING.set and .reset
cdef object _leave_serving = _requests._served
cdef object _GIOP_1_2 = GIOP_1_2
cdef object _SYNC = Style.SYNC
cdef object _CONVERSIONS = CHAR_CONVERSIONS
cdef object _Binding = Binding
cdef object _Route = Route
cdef object _Entry = OpEntry
cdef object _Operation = Operation
cdef object _Recorder = Recorder
cdef object _finish = Recorder.finish  # its C twin, when that is in place
cdef dict _REFUSALS = _requests._REFUSALS

# The slots read here, at their offsets for objects of exactly these classes (a
# generic attribute lookup from C costs about a hundred instructions); a
# handler's, for every handler class _serves accepts.
cdef tuple _HANDLER_SLOTS = ("core", "adapter", "interceptors", "value_bounds", "_version", "send", "max_message_size",
                             "loop")
cdef tuple _HANDLER = _slot_offsets(_Handler, _HANDLER_SLOTS)
cdef tuple _REQUEST = _slot_offsets(Request, ("addressing_disposition", "service_contexts", "object_key", "operation",
                                              "version", "response_flags", "body", "body_offset", "little_endian",
                                              "fragment_starts", "request_id"))
cdef tuple _BINDING = _slot_offsets(Binding, ("manager", "routes", "servant"))
cdef tuple _ROUTE = _slot_offsets(Route, ("admission", "inline", "entry", "stats", "queued"))
cdef tuple _ENTRY = _slot_offsets(OpEntry, ("op", "style", "attr"))
cdef tuple _OPERATION = _slot_offsets(Operation, ("args",))
cdef object _Core = GIOPConnection
cdef tuple _CORE_SET = _slot_offsets(GIOPConnection, ("char_set", "max_fragment_size"))
cdef Py_ssize_t _C_CHAR_SET = -1 if _CORE_SET is None else _CORE_SET[0]
cdef Py_ssize_t _C_FRAGMENT = -1 if _CORE_SET is None else _CORE_SET[1]
cdef tuple _RECORDER = _slot_offsets(Recorder, ("started", "lock", "dropped"))
cdef bint _KNOWN = not (_HANDLER is None or _REQUEST is None or _BINDING is None or _ROUTE is None
                        or _OPERATION is None or _RECORDER is None)
cdef bint _ENTRY_KNOWN = _ENTRY is not None
cdef Py_ssize_t _H_CORE, _H_ADAPTER, _H_INTERCEPTORS, _H_BOUNDS, _H_VERSION, _H_SEND, _H_MAX_SIZE, _H_LOOP
cdef Py_ssize_t _R_ADDRESSING, _R_CONTEXTS, _R_KEY, _R_OPERATION, _R_VERSION, _R_FLAGS, _R_BODY, _R_OFFSET, _R_LE
cdef Py_ssize_t _R_FRAGMENTS, _R_ID, _B_MANAGER, _B_ROUTES, _B_SERVANT, _RT_ADMISSION, _RT_INLINE, _RT_ENTRY, _RT_STATS
cdef Py_ssize_t _E_OP, _E_STYLE, _E_ATTR, _O_ARGS, _S_STARTED, _S_LOCK, _S_DROPPED, _RT_QUEUED
if _KNOWN:
    _H_CORE, _H_ADAPTER, _H_INTERCEPTORS, _H_BOUNDS, _H_VERSION, _H_SEND, _H_MAX_SIZE, _H_LOOP = _HANDLER
    (_R_ADDRESSING, _R_CONTEXTS, _R_KEY, _R_OPERATION, _R_VERSION, _R_FLAGS, _R_BODY, _R_OFFSET, _R_LE,
     _R_FRAGMENTS, _R_ID) = _REQUEST
    _B_MANAGER, _B_ROUTES, _B_SERVANT = _BINDING
    _RT_ADMISSION, _RT_INLINE, _RT_ENTRY, _RT_STATS, _RT_QUEUED = _ROUTE
    _O_ARGS, = _OPERATION
    _S_STARTED, _S_LOCK, _S_DROPPED = _RECORDER
if _ENTRY_KNOWN:
    _E_OP, _E_STYLE, _E_ATTR = _ENTRY

# The INVOCATION_POLICIES context every pyorb call with a timeout sends (policies.deadline_context):
# its fixed bytes, little-endian, around the relative timeout's ticks.
cdef object _ServiceContext = ServiceContext
cdef tuple _CONTEXT = _slot_offsets(ServiceContext, ("context_id", "data"))
cdef Py_ssize_t _SC_ID = -1 if _CONTEXT is None else _CONTEXT[0]
cdef Py_ssize_t _SC_DATA = -1 if _CONTEXT is None else _CONTEXT[1]
cdef object _POLICIES = SC_INVOCATION_POLICIES
cdef bytes _RELATIVE_HEAD = _policies._RELATIVE_HEAD_LE
cdef bytes _END_HEAD = _policies._END_HEAD_LE
cdef Py_ssize_t _POLICIES_SIZE = _policies._DEADLINE_SIZE
cdef Py_ssize_t _TICKS_AT = _policies._TICKS_AT
cdef Py_ssize_t _END_TYPE_AT = _policies._END_TYPE_AT
cdef double _TICKS = _policies._TICKS
cdef bint _POLICIES_KNOWN = (_CONTEXT is not None and len(_RELATIVE_HEAD) == _TICKS_AT
                             and _TICKS_AT + 8 <= _END_TYPE_AT and _END_TYPE_AT + len(_END_HEAD) <= _POLICIES_SIZE)


cdef object _deadline_of(handler, message, contexts):
    """``handler._client_deadline(message)`` for a request whose only context is the one a pyorb
    caller with a timeout sends (``request_deadline``'s first case, on the same clock); any
    other to the original, which reads every form and logs a malformed one."""
    cdef const unsigned char* p
    cdef unsigned long long ticks = 0
    cdef int i
    if (_POLICIES_KNOWN and type(contexts) is tuple and len(<tuple>contexts) == 1
            and type((<tuple>contexts)[0]) is _ServiceContext):
        context = contexts[0]
        data = _get(context, True, _SC_DATA, "data")
        if (_get(context, True, _SC_ID, "context_id") == _POLICIES and type(data) is bytes
                and len(<bytes>data) == _POLICIES_SIZE):
            p = <const unsigned char*><bytes>data
            if (memcmp(p, <const char*>_RELATIVE_HEAD, _TICKS_AT) == 0
                    and memcmp(p + _END_TYPE_AT, <const char*>_END_HEAD, len(_END_HEAD)) == 0):
                for i in range(7, -1, -1):
                    ticks = (ticks << 8) | p[_TICKS_AT + i]
                if ticks < (1ULL << 53):  # exact as a double: the original's int / int, rounded once
                    return _monotonic() + <double>ticks / _TICKS
    return _client_deadline(handler, message)


cdef dict _classes = {_Handler: True}  # a handler class -> whether the twin's own path serves its requests


cdef bint _serves(cls) except -1:
    """Whether the twin's own path serves requests for handlers of ``cls``: its slots read
    here are RequestHandler's and the methods the originals call are RequestHandler's
    own.  Checked once per class."""
    known = _classes.get(cls)
    if known is None:
        known = _slot_offsets(cls, _HANDLER_SLOTS) == _HANDLER \
            and tuple(getattr(cls, name, None) for name in _CALLED) == _CALLED_HERE
        _classes[cls] = known
    return known


def message_received(self, message):
    """As :meth:`pyorb.server.requests.RequestHandler.message_received`."""
    if type(message) is not _Request or not _KNOWN or not _serves(type(self)):
        return _original(self, message)
    # _request's steps before the lookup.
    if _get(message, True, _R_ADDRESSING, "addressing_disposition"):
        return _original(self, message)
    contexts = _get(message, True, _R_CONTEXTS, "service_contexts")
    deadline = _deadline_of(self, message, contexts) if contexts else None
    core = _get(self, True, _H_CORE, "core")
    char_set = _get(core, _CORE_SET is not None and type(core) is _Core, _C_CHAR_SET, "char_set")
    if char_set not in _CONVERSIONS:
        _codeset_incompatible(self, message)
        return
    found = _get(self, True, _H_ADAPTER, "adapter").lookup(_get(message, True, _R_KEY, "object_key"))
    if found is None:
        _not_here(self, message)
        return
    cdef bint binding = type(found) is _Binding
    manager = _get(found, binding, _B_MANAGER, "manager")
    interceptors = _get(self, True, _H_INTERCEPTORS, "interceptors")
    if manager is not None:
        if interceptors:
            _intercept(self, message, found, None)
        else:
            manager.serve(self, message, None, deadline)
        return
    # serve's checks: a request it would not answer inline is its own.  The client's deadline
    # is judged before the arguments are read (serve judges it after): one that passed sends
    # the request to serve, which finds it passed too.
    route = _get(found, binding, _B_ROUTES, "routes").get(_get(message, True, _R_OPERATION, "operation"))
    version = _get(message, True, _R_VERSION, "version")
    if route is None or interceptors or version != _GIOP_1_2 or \
            not (_get(message, True, _R_FLAGS, "response_flags") & 1):
        return _serve(self, message, found, None, deadline)
    cdef bint plain_route = type(route) is _Route
    admission = _get(route, plain_route, _RT_ADMISSION, "admission")
    if admission is not None:  # asked here, as serve would first: a refusal is answered without serve's frame
        refused = admission.refusal(_get(self, True, _H_LOOP, "loop"), _get(route, plain_route, _RT_QUEUED, "queued"),
                                    self)
        if refused is None:
            return _serve(self, message, found, None, deadline, None, None, None, None, True)
        _refuse(self, message, route, plain_route, refused)
        return
    if not _get(route, plain_route, _RT_INLINE, "inline") or \
            (deadline is not None and not _monotonic() < deadline):
        return _serve(self, message, found, None, deadline)
    entry = _get(route, plain_route, _RT_ENTRY, "entry")
    cdef bint plain_entry = _ENTRY_KNOWN and type(entry) is _Entry
    if _get(entry, plain_entry, _E_STYLE, "style") is not _SYNC:
        return _serve(self, message, found, None, deadline)
    op = _get(entry, plain_entry, _E_OP, "op")
    codec = _get(op, type(op) is _Operation, _O_ARGS, "args")
    try:
        args = codec.unpack(_get(message, True, _R_BODY, "body"), _get(message, True, _R_OFFSET, "body_offset"),
                            _get(message, True, _R_LE, "little_endian"),
                            _get(message, True, _R_FRAGMENTS, "fragment_starts"),
                            _get(self, True, _H_BOUNDS, "value_bounds"), char_set, False)
    except Exception:  # unreadable: serve reads them again and answers the error its way
        return _serve(self, message, found, None, deadline)
    _put(self, True, _H_VERSION, "_version", version)
    stats = _get(route, plain_route, _RT_STATS, "stats")
    cdef bint plain_stats = type(stats) is _Recorder
    _put(stats, plain_stats, _S_STARTED, "started", _get(stats, plain_stats, _S_STARTED, "started") + 1)
    servant = _get(found, binding, _B_SERVANT, "servant")
    if deadline is None:
        _answer(self, servant, route, plain_route, entry, plain_entry, args, message)
        return
    # As _answer_inline_until: the servant runs with the request in SERVING.
    serving = _new_serving(_Serving)
    serving.operation = _get(message, True, _R_OPERATION, "operation")
    serving.object_key = _get(message, True, _R_KEY, "object_key")
    serving.deadline = deadline
    serving.object_id = None
    token = _enter_serving(serving)
    try:
        _answer(self, servant, route, plain_route, entry, plain_entry, args, message)
    finally:
        _leave_serving(token)


cdef _refuse(self, message, route, bint plain_route, str detail):
    """As :meth:`pyorb.server.requests.RequestHandler._overloaded` for a GIOP 1.2 request that
    expects a reply, without interceptors, whose refusal was encoded before: that reply with
    the request's id.  Any other goes to the original."""
    core = _get(self, True, _H_CORE, "core")
    little = _get(message, True, _R_LE, "little_endian")
    encoded = _REFUSALS.get((little, _get(core, _CORE_SET is not None and type(core) is _Core, _C_FRAGMENT,
                                          "max_fragment_size"), detail))
    if encoded is None:
        _overloaded(self, message, route, None, detail)
        return
    _put(self, True, _H_VERSION, "_version", _get(message, True, _R_VERSION, "version"))
    stats = _get(route, plain_route, _RT_STATS, "stats")
    cdef bint plain_stats = type(stats) is _Recorder
    _put(stats, plain_stats, _S_STARTED, "started", _get(stats, plain_stats, _S_STARTED, "started") + 1)
    if plain_stats:
        _finish(stats, 0.0, 0.0, True)
    else:
        stats.finish(0.0, 0.0, True)
    if _get(self, True, _H_SEND, "send")(_with_id(encoded, _get(message, True, _R_ID, "request_id"), little)):
        return
    lock = _get(stats, plain_stats, _S_LOCK, "lock")
    with lock:
        _put(stats, plain_stats, _S_DROPPED, "dropped", _get(stats, plain_stats, _S_DROPPED, "dropped") + 1)


cdef bytes _with_id(bytes reply, request_id, bint little):
    """As ``pyorb.giop.fast12.reply_12_to``: a copy of the GIOP 1.2 Reply ``reply`` answering ``request_id``."""
    cdef unsigned long rid = request_id
    cdef bytes copy = PyBytes_FromStringAndSize(PyBytes_AS_STRING(reply), PyBytes_GET_SIZE(reply))
    cdef unsigned char* p = <unsigned char*>PyBytes_AS_STRING(copy) + 12  # past the GIOP header
    if little:
        p[0], p[1], p[2], p[3] = rid & 0xFF, (rid >> 8) & 0xFF, (rid >> 16) & 0xFF, (rid >> 24) & 0xFF
    else:
        p[0], p[1], p[2], p[3] = (rid >> 24) & 0xFF, (rid >> 16) & 0xFF, (rid >> 8) & 0xFF, rid & 0xFF
    return copy


# The request a plain synchronous servant runs for, inline on the thread
# _inline_thread (the loop's): what pyorb.current() finds in the frame of the
# Python original.  Saved and restored around each answer, so that it is always
# the innermost one.
cdef object _inline_request = None
cdef unsigned long _inline_thread = 0


cdef _answer(self, servant, route, bint plain_route, entry, bint plain_entry, args, message):
    """As :meth:`pyorb.server.requests.RequestHandler._answer_inline`, without an object id."""
    global _inline_request, _inline_thread
    outer_request, outer_thread = _inline_request, _inline_thread
    _inline_request, _inline_thread = message, PyThread_get_thread_ident()
    try:
        started = _perf_counter()
        try:
            value = getattr(servant, _get(entry, plain_entry, _E_ATTR, "attr"))(*args)
        except Exception as exc:
            _servant_raised(_late_call(self, servant, route, args, message, started), exc)
            return
        data = _plain_reply_12(_get(entry, plain_entry, _E_OP, "op"), value, _get(message, True, _R_ID, "request_id"),
                               _get(message, True, _R_LE, "little_endian"), _get(self, True, _H_CORE, "core"),
                               _get(self, True, _H_MAX_SIZE, "max_message_size"))
        if data is None:
            _late_call(self, servant, route, args, message, started).result(value)
            return
        stats = _get(route, plain_route, _RT_STATS, "stats")
        service = _perf_counter() - started
        if type(stats) is _Recorder:
            _finish(stats, 0.0, service, False)
        else:
            stats.finish(0.0, service, False)
        if not _get(self, True, _H_SEND, "send")(data):
            with stats.lock:
                stats.dropped += 1
    finally:
        _inline_request, _inline_thread = outer_request, outer_thread


def _inline_served():
    """The request answered inline on the calling thread, and its object id (None), or None."""
    if _inline_request is not None and _inline_thread == PyThread_get_thread_ident():
        return _inline_request, None
    return None


serve_inline(_inline_served)


def serves(cls):
    """Whether the twin's own path serves requests for handlers of class ``cls`` (else the originals run)."""
    return _KNOWN and _serves(cls)
