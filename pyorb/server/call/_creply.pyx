# cython: language_level=3, boundscheck=False, wraparound=False
"""A servant's reply in C: the compiled twin of ``pyorb.server.call.reply.plain_reply_12``.

Every call a reactive server answers inline, and every reply a dispatcher
thread writes itself, passes through ``plain_reply_12``: in Python that is
four frames (the function, the operation's ``result_tuple``, the result
codec's ``pack`` and the core's ``reply_12``) around one omniORB marshal
and one header.  This twin does the common case in one: a result of no
value or of one padding-free value (a number, a struct of numbers, an
enum), strings or none read in UTF-8, on a connection that does not
fragment.  Every other reply goes to the Python original, so errors and
every other case come from one place; tests/test_reply_twin.py
checks that both give the same bytes or None for the same replies.
"""

from pyorb.giop import fast12 as _fast12
from pyorb.giop._cframing cimport _get, _slot_offsets
from pyorb.giop.connection import GIOPConnection
from pyorb.marshal._cbody cimport pack_one
from pyorb.marshal.body import Operation
from pyorb.server.call import reply as _reply

# The original: every case but the common one.
_original = _reply.plain_reply_12
# Bound after pyorb.giop's twin switch ran: the C encoder when the accelerator is in use.
_encode = _fast12.encode_reply_12

# The slots read here, at their offsets for objects of exactly these classes
# (a generic attribute lookup from C costs about a hundred instructions).
cdef tuple _OPERATION = _slot_offsets(Operation, ("_result_shape", "results"))
cdef tuple _CORE = _slot_offsets(GIOPConnection, ("max_fragment_size", "char_set"))
cdef bint _KNOWN = not (_OPERATION is None or _CORE is None)
cdef Py_ssize_t _SHAPE, _RESULTS, _FRAGMENT, _CHAR_SET
if _KNOWN:
    _SHAPE, _RESULTS = _OPERATION
    _FRAGMENT, _CHAR_SET = _CORE


def plain_reply_12(op, value, request_id, little_endian, core, max_size):
    """As :func:`pyorb.server.call.reply.plain_reply_12`."""
    cdef bint fast = _KNOWN and type(op) is Operation and type(core) is GIOPConnection
    if _get(core, fast, _FRAGMENT, "max_fragment_size") is not None:
        return _original(op, value, request_id, little_endian, core, max_size)
    shape = _get(op, fast, _SHAPE, "_result_shape")
    if shape == 0:
        body = b""
    elif shape == 1:
        try:
            body = pack_one(_get(op, fast, _RESULTS, "results"), value,
                            _get(core, fast, _CHAR_SET, "char_set"), little_endian)
        except Exception:  # the original's BAD_PARAM or MARSHAL: the general way explains it
            return None
        if body is None:
            return _original(op, value, request_id, little_endian, core, max_size)
    else:
        return _original(op, value, request_id, little_endian, core, max_size)
    data = _encode(request_id, 0, body, little_endian)  # 0: NO_EXCEPTION
    return data if len(data) <= max_size else None
