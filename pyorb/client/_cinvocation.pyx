# cython: language_level=3, boundscheck=False, wraparound=False
"""A call's reply delivered in C: the compiled twins of ``ClientConnection.message_received``
and ``Invocation.complete``.

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
"""

from pyorb.client import connection as _connection
from pyorb.client import invocation as _invocation
from pyorb.giop._cframing cimport _get, _slot_offsets
from pyorb.giop.codesets import CS_UTF8
from pyorb.giop.messages import Reply, ReplyStatus
from pyorb.marshal.body import BodyCodec, Operation
from pyorb.marshal.orb import cdr_unmarshal

# The originals: every case but the common one.
_original_message_received = _connection.ClientConnection.message_received
_original_complete = _invocation.Invocation.complete
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
