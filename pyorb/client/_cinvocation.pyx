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
from pyorb.giop.codesets import CS_UTF8
from pyorb.giop.messages import Reply, ReplyStatus
from pyorb.marshal.orb import cdr_unmarshal

# The originals: every case but the common one.
_original_message_received = _connection.ClientConnection.message_received
_original_complete = _invocation.Invocation.complete
cdef object _Reply = Reply
cdef object _NO_EXCEPTION = ReplyStatus.NO_EXCEPTION
cdef object _UTF8 = CS_UTF8


cdef bint _settle(inv, reply) except -1:
    """Complete ``inv`` with a common ``reply``; False if it is not one (the original's way)."""
    if reply.reply_status is not _NO_EXCEPTION or inv.intercepted is not None or inv.member is not None:
        return False
    conn = inv.conn
    if conn is None:
        return False
    op = inv.op
    shape = op._result_shape
    if shape == 0:
        value = None
    elif shape == 1:
        results = op.results
        one = results._one
        if (one is None or reply.body_offset & 7 or reply.fragment_starts
                or (results._strings and conn.core.char_set != _UTF8)):
            return False
        try:
            value = cdr_unmarshal(one, reply.body, reply.little_endian)
        except Exception:  # the original reads it again, logs it and fails the call with MARSHAL
            return False
    else:
        return False
    if inv.deadlines is not None:  # else nothing to release: the connection has dropped the call
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
