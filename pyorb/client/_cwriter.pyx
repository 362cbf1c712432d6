# cython: language_level=3, boundscheck=False, wraparound=False
"""A client connection's request writer in C: the compiled twin of ``pyorb.client.calls.RequestWriter``.

A client makes one request per call, and the Python writer spends two
frames on it (``request``, then the core's ``request_12``) for what is, once
the connection's code sets are chosen, a counter step, the arguments'
marshaling and one GIOP 1.2 header.  This class does that case in C, with
its state in C fields, with or without service contexts (a call with a
deadline carries one); every other request (the connection's first,
GIOP 1.0/1.1, a connection that fragments) goes to the
Python original's method, which this class's public fields let run on it
unchanged.  tests/test_client_twins.py checks that both give the same ids,
bytes, errors and connection state for the same requests.
"""

from pyorb.client import calls as _calls
from pyorb.giop import fast12 as _fast12
from pyorb.giop._cframing cimport _get, _slot_offsets
from pyorb.giop.messages import GIOP_1_2, SYNC_NONE, SYNC_WITH_TARGET
from pyorb.marshal._cbody cimport pack_one
from pyorb.marshal.body import Operation

from omniORB import CORBA

# The original class: its methods run on this one for every case but the common one.
_Original = _calls.RequestWriter
_original_init = _Original.__init__
_original_request = _Original.request
_original_too_big = _Original._too_big
_original_cancel = _Original.cancel
# Bound after pyorb.giop's twin switch ran: the C encoder when the accelerator is in use.
_encode = _fast12.encode_request_12
_encode_contexts = _fast12.encode_request_12_contexts
_SystemException = CORBA.SystemException
_GIOP_1_2 = GIOP_1_2

# The slot numbered_body reads, at its offset for an operation of exactly this class.
cdef tuple _OPERATION = _slot_offsets(Operation, ("args",))
cdef bint _KNOWN = _OPERATION is not None
cdef Py_ssize_t _ARGS
if _KNOWN:
    (_ARGS,) = _OPERATION


cdef class RequestWriter:
    """The compiled twin of :class:`pyorb.client.calls.RequestWriter` (same constructor, methods and fields)."""

    cdef public object _next_id
    cdef public object _first_id
    cdef public object _step
    cdef public object _chosen
    cdef public object core
    cdef public object little_endian
    cdef public object max_message_size

    def __init__(self, config, core, first_id=1, step=1):
        _original_init(self, config, core, first_id, step)

    def request(self, op, args, object_key, version, code_sets=None, orb_type=None, extra_contexts=()):
        """As :meth:`pyorb.client.calls.RequestWriter.request`."""
        core = self.core
        if (self._chosen is not True or (extra_contexts and type(extra_contexts) is not tuple)
                or type(object_key) is not bytes
                or not (version is _GIOP_1_2 or version == _GIOP_1_2) or core.max_fragment_size is not None):
            return _original_request(self, op, args, object_key, version, code_sets, orb_type, extra_contexts)
        rid, body = numbered_body(self, op, args)
        le = self.little_endian
        flags = SYNC_NONE if op.oneway else SYNC_WITH_TARGET
        if extra_contexts:  # a deadline's context, an interceptor's
            return rid, _encode_contexts(rid, flags, object_key, op.name, extra_contexts, body, le)
        return rid, _encode(rid, flags, object_key, op.name, body, le)

    def _too_big(self, op, size):
        return _original_too_big(self, op, size)

    def cancel(self, request_id):
        """A CancelRequest for ``request_id``."""
        return _original_cancel(self, request_id)


def numbered_body(RequestWriter writer not None, op, args):
    """The next request id of ``writer`` (counted) and the GIOP 1.2 body of a call of ``op`` with ``args``,
    once the connection's code sets are chosen: what a common request takes, whatever its header
    (``RequestWriter.request`` here; the blocking client's compiled call, which adds a deadline's context).
    ``writer`` is this module's class (every writer is, where the twins run): its fields are read as C fields."""
    rid = writer._next_id
    step = writer._step
    writer._next_id = rid + step if rid <= 0xFFFFFFFF - step else writer._first_id
    codec = _get(op, _KNOWN and type(op) is Operation, _ARGS, "args")
    char_set = writer.core.char_set
    try:
        body = None
        if type(args) is tuple and len(<tuple>args) == 1:
            try:
                body = pack_one(codec, (<tuple>args)[0], char_set, writer.little_endian)
            except _SystemException:
                raise
            except Exception as exc:  # BodyCodec.pack's error for a value of the wrong type
                raise CORBA.BAD_PARAM(0, CORBA.COMPLETED_NO) from exc
        if body is None:
            body = codec.pack(args, 0, writer.little_endian, char_set)
    except _SystemException as exc:
        raise op.argument_error(args, exc) from None
    if len(body) > writer.max_message_size:
        raise writer._too_big(op, len(body))
    return rid, body
