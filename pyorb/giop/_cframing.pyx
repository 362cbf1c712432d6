# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""GIOP framing in C: compiled twins of the core's per-message and per-read functions.

``pyorb.giop.twins`` puts these in place of ``header.parse_header``,
``fast12``'s ``encode_request_12``, ``encode_reply_12``,
``_decode_request_12_fast`` and ``_decode_reply_12_fast``,
``connection._next_common`` (the common message framed and decoded in one
step) and ``GIOPConnection``'s per-read methods ``receive_data`` and
``next_event`` when the compiled accelerator is in use
(``pyorb._accelerator``).  Each reads and writes the bytes directly instead
of going through ``struct`` and slices, and returns exactly what its Python
twin returns.  What it reads of the Python side (``GIOPConnection``'s slots,
the modules' names) is declared in ``twins.CONNECTION_STATE`` and
``twins.MODULE_NAMES``.
Anything but the common case (an error to explain, a number out of range,
a buffer of an unusual type) is handed to the Python twin, so errors and
their messages come from one place; tests/giop/test_cframing.py checks the
two agree on generated and malformed input.
"""

from cpython.object cimport PyObject
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport uint8_t, uint32_t
from libc.string cimport memcpy, memset

# twins.install imports this module before it replaces anything, so the names read here are the originals.
from pyorb.giop import fast12 as _fast12
from pyorb.giop import header as _header
from pyorb.giop import messages as _messages
from pyorb.giop.errors import ProtocolError as _ProtocolError

cdef object _py_parse_header = _header.parse_header
cdef object _py_decode_request = _fast12._decode_request_12_fast
cdef object _py_encode_request = _fast12.encode_request_12
cdef object _py_encode_request_contexts = _fast12.encode_request_12_contexts
cdef object _py_encode_reply = _fast12.encode_reply_12
cdef object _Header = _header.Header
cdef object _new_tuple = tuple.__new__
cdef object _build_request = _fast12._build_request
cdef object _build_reply = _fast12._build_reply
cdef object _ServiceContext = _messages.ServiceContext
cdef object _GIOP_1_2 = _messages.GIOP_1_2
cdef tuple _REPLY_STATUSES = _fast12._REPLY_STATUSES
cdef object _EMPTY = ()
cdef int _REQUEST = int(_messages.MsgType.REQUEST)
cdef int _REPLY = int(_messages.MsgType.REPLY)


cdef extern from *:
    """
    /* An instance of the slotted class `type` with its slots (at `offsets`, each
       a plain object slot: see _slot_offsets) set to `values`: what the frozen
       dataclass's __init__ makes, without its object.__setattr__ per field and
       without a member descriptor's __set__ per slot.  tp_alloc zeroes the
       instance, so no slot holds anything to release. */
    static PyObject *pyorb_filled(PyObject *type, const Py_ssize_t *offsets, Py_ssize_t n,
                                  PyObject *const *values) {
        PyObject *obj = ((PyTypeObject *)type)->tp_alloc((PyTypeObject *)type, 0);
        Py_ssize_t i;
        if (obj == NULL)
            return NULL;
        for (i = 0; i < n; i++) {
            Py_INCREF(values[i]);
            *(PyObject **)((char *)obj + offsets[i]) = values[i];
        }
        return obj;
    }
    """
    object _filled "pyorb_filled"(object cls, const Py_ssize_t* offsets, Py_ssize_t n, PyObject** values)


cdef tuple _filled_offsets(cls, tuple fields):
    """The offsets of ``cls``'s slots in ``fields`` order, or None where fast12 builds it some
    other way (its layout is not the one expected, or something runs after ``__init__``)."""
    if getattr(cls, "__slots__", None) != fields or hasattr(cls, "__post_init__"):
        return None
    return _slot_offsets(cls, fields)


cdef bint _offsets_into(tuple offsets, Py_ssize_t* into) except -1:
    """Copy ``offsets`` (from ``_filled_offsets``) into the C array ``into``: whether there were any."""
    cdef Py_ssize_t i
    if offsets is None:
        return False
    for i in range(len(offsets)):
        into[i] = offsets[i]
    return True


cdef tuple _slot_offsets(cls, tuple names):
    """The offsets of ``cls``'s plain object slots ``names`` (as ``_get`` and ``_put`` take them),
    or None if one of them is not such a slot: what ``cls``'s instances find under the name,
    through its MRO, must be a member descriptor (a subclass may hide a slot behind a property)."""
    cdef list offsets = []
    cdef Py_ssize_t offset
    for name in names:
        descr = None
        for klass in cls.__mro__:
            descr = vars(klass).get(name)
            if descr is not None:
                break
        offset = -1 if descr is None else _slot_offset(descr)
        if offset < 0:
            return None
        offsets.append(offset)
    return tuple(offsets)


# GIOPConnection's slots that the per-read twins use (twins.CONNECTION_STATE),
# read and written at their offsets: a generic attribute lookup from C costs
# about a hundred instructions, an offset read a few.  Only an instance of
# GIOPConnection itself, whose class's slots were checked when first met, is
# read this way; anything else (a subclass, which could hide a slot behind a
# property) through getattr and setattr as before.
cdef object _Conn = None  # GIOPConnection once bound; a class nothing is an instance of if its slots are not plain
cdef Py_ssize_t _BUF, _POS, _HEADER, _TRAINS, _RECEIVES, _ERROR, _EOF, _MAX_SIZE, _CHOSEN, _PEER_VERSION, _PEER_LE


cdef class _NoConnection:
    """The class of no connection: what ``_Conn`` is when slots cannot be read by offset."""


cdef int _bind() except -1:
    global _Conn, _BUF, _POS, _HEADER, _TRAINS, _RECEIVES, _ERROR, _EOF, _MAX_SIZE, _CHOSEN, _PEER_VERSION, _PEER_LE
    from pyorb.giop.connection import GIOPConnection
    from pyorb.giop.twins import CONNECTION_STATE
    offsets = _slot_offsets(GIOPConnection, CONNECTION_STATE)
    if offsets is None:
        _Conn = _NoConnection
        return 0
    (_BUF, _POS, _HEADER, _TRAINS, _RECEIVES, _ERROR, _EOF, _MAX_SIZE, _CHOSEN, _PEER_VERSION,
     _PEER_LE) = offsets
    _Conn = GIOPConnection
    return 0


cdef inline bint _by_offset(conn) except -1:
    """Whether ``conn``'s slots are read and written at their offsets."""
    if _Conn is None:
        _bind()
    return type(conn) is _Conn


cdef object _Request = _messages.Request
cdef object _Reply = _messages.Reply
# Where each message class's slots are, for _filled; a class whose layout is not the
# expected one is built by its Python builder instead.
cdef Py_ssize_t _REQUEST_SLOTS[12]
cdef Py_ssize_t _REPLY_SLOTS[8]
cdef Py_ssize_t _CONTEXT_SLOTS[2]
cdef bint _REQUEST_FILLED = _offsets_into(_filled_offsets(_Request, _fast12._REQUEST_FIELDS), _REQUEST_SLOTS)
cdef bint _REPLY_FILLED = _offsets_into(_filled_offsets(_Reply, _fast12._REPLY_FIELDS), _REPLY_SLOTS)
cdef bint _CONTEXT_FILLED = _offsets_into(_filled_offsets(_ServiceContext, ("context_id", "data")), _CONTEXT_SLOTS)
cdef object _KEY_ADDR = _header.KEY_ADDR
cdef object _NO_PRINCIPAL = b""
cdef object _NEED_DATA = _messages.NEED_DATA


cdef object _new_request(object request_id, object flags, object key, object operation, object body,
                         object contexts, object little, object body_offset):
    """``fast12._build_request(...)`` for a GIOP 1.2 KeyAddr Request, its slots filled in C."""
    cdef PyObject* values[12]
    if not _REQUEST_FILLED:
        return _build_request(request_id, flags, key, operation, body, contexts, _GIOP_1_2, little, body_offset)
    values[0] = <PyObject*>request_id
    values[1] = <PyObject*>flags
    values[2] = <PyObject*>key
    values[3] = <PyObject*>operation
    values[4] = <PyObject*>body
    values[5] = <PyObject*>contexts
    values[6] = <PyObject*>_GIOP_1_2
    values[7] = <PyObject*>little
    values[8] = <PyObject*>body_offset
    values[9] = <PyObject*>_NO_PRINCIPAL
    values[10] = <PyObject*>_KEY_ADDR
    values[11] = <PyObject*>_EMPTY
    return _filled(_Request, _REQUEST_SLOTS, 12, values)


cdef object _new_context(object context_id, object data):
    """``ServiceContext(context_id, data)``, its slots filled in C (a timed call's request carries one)."""
    cdef PyObject* values[2]
    if not _CONTEXT_FILLED:
        return _ServiceContext(context_id, data)
    values[0] = <PyObject*>context_id
    values[1] = <PyObject*>data
    return _filled(_ServiceContext, _CONTEXT_SLOTS, 2, values)


cdef object _new_reply(object request_id, object status, object body, object little, object body_offset):
    """``fast12._build_reply(...)`` for a GIOP 1.2 Reply without service contexts, its slots filled in C."""
    cdef PyObject* values[8]
    if not _REPLY_FILLED:
        return _build_reply(request_id, status, body, _EMPTY, _GIOP_1_2, little, body_offset)
    values[0] = <PyObject*>request_id
    values[1] = <PyObject*>status
    values[2] = <PyObject*>body
    values[3] = <PyObject*>_EMPTY
    values[4] = <PyObject*>_GIOP_1_2
    values[5] = <PyObject*>little
    values[6] = <PyObject*>body_offset
    values[7] = <PyObject*>_EMPTY
    return _filled(_Reply, _REPLY_SLOTS, 8, values)


cdef list _header_entries():
    """header's table of valid headers, indexed by (minor, flags, type) instead of 8 bytes."""
    cdef list entries = [None] * (3 * 4 * 8)
    for prefix, (version, little, more, msg_type, _order) in _header._HEADER_TABLE.items():
        if version[0] == 1 and 0 <= version[1] <= 2 and prefix[6] < 4 and prefix[7] < 8:
            entries[(version[1] * 4 + prefix[6]) * 8 + prefix[7]] = (version, little, more, msg_type)
    return entries


cdef list _HEADERS = _header_entries()


cdef inline uint32_t _u32(const uint8_t* p, bint little) noexcept nogil:
    if little:
        return p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16) | (<uint32_t>p[3] << 24)
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]


cdef inline void _put_u32(uint8_t* p, uint32_t v, bint little) noexcept nogil:
    if little:
        p[0] = v & 0xFF; p[1] = (v >> 8) & 0xFF; p[2] = (v >> 16) & 0xFF; p[3] = v >> 24
    else:
        p[0] = v >> 24; p[1] = (v >> 16) & 0xFF; p[2] = (v >> 8) & 0xFF; p[3] = v & 0xFF


cdef inline void _giop_12_header(uint8_t* p, int msg_type, uint32_t size, bint little) noexcept nogil:
    memcpy(p, b"GIOP\x01\x02", 6)
    p[6] = 1 if little else 0
    p[7] = msg_type
    _put_u32(p + 8, size, little)


def parse_header(data, Py_ssize_t offset=0):
    """The compiled twin of ``header.parse_header``."""
    cdef Py_buffer view
    cdef const uint8_t* p
    cdef object entry = None
    cdef uint32_t size = 0
    if offset < 0:
        return _py_parse_header(data, offset)
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        if view.len - offset >= 12:
            p = <const uint8_t*>view.buf + offset
            if (p[0] == 71 and p[1] == 73 and p[2] == 79 and p[3] == 80 and p[4] == 1 and p[5] <= 2
                    and p[6] < 4 and p[7] < 8):  # b"GIOP", 1.0 to 1.2
                entry = _HEADERS[(p[5] * 4 + p[6]) * 8 + p[7]]
                if entry is not None:
                    size = _u32(p + 8, p[6] & 1)
    finally:
        PyBuffer_Release(&view)
    if entry is None:
        return _py_parse_header(data, offset)  # it says what is wrong
    version, little, more, msg_type = <tuple>entry
    return _new_tuple(_Header, (version, little, more, msg_type, size))


cdef object _request_at(const uint8_t* d, Py_ssize_t n, bint little):
    """A GIOP 1.2 Request body (KeyAddr) at ``d``, or None for the general decoder."""
    cdef Py_ssize_t end, p, key_len, op_len, count, length, start, i
    cdef uint32_t context_id
    if n < 16 or (d[8] | d[9]) != 0:  # the TargetAddress discriminator: KeyAddr is 0 in either byte order
        return None
    key_len = _u32(d + 12, little)
    end = 16 + key_len
    p = (end + 3) & ~3
    if p + 4 > n:
        return None
    key = PyBytes_FromStringAndSize(<const char*>d + 16, key_len)
    op_len = _u32(d + p, little)
    p += 4
    end = p + op_len
    if op_len == 0 or end + 4 > n or d[end - 1] != 0:
        return None
    try:
        operation = PyUnicode_DecodeUTF8(<const char*>d + p, op_len - 1, NULL)
    except UnicodeDecodeError:
        return None
    p = (end + 3) & ~3
    if p + 4 > n:
        return None
    count = _u32(d + p, little)
    p += 4
    contexts = _EMPTY
    if count:
        if count * 8 > n - p:
            return None
        items = []
        for i in range(count):
            if p + 8 > n:
                return None
            context_id = _u32(d + p, little)
            length = _u32(d + p + 4, little)
            p += 8
            if p + length > n:
                return None
            items.append(_new_context(context_id, PyBytes_FromStringAndSize(<const char*>d + p, length)))
            p = (p + length + 3) & ~3
        contexts = tuple(items)
    start = p + ((-(p + 12)) & 7)
    body = PyBytes_FromStringAndSize(<const char*>d + start, n - start) if start < n else b""
    return _new_request(_u32(d, little), d[4], key, operation, body, contexts, little, start + 12)


cdef object _reply_at(const uint8_t* d, Py_ssize_t n, bint little):
    """A GIOP 1.2 Reply body without service contexts at ``d``, or None for the general decoder."""
    cdef uint32_t status
    if n < 12:
        return None
    status = _u32(d + 4, little)
    if _u32(d + 8, little) or status > 5:
        return None
    body = PyBytes_FromStringAndSize(<const char*>d + 12, n - 12)
    return _new_reply(_u32(d, little), _REPLY_STATUSES[status], body, little, 24)


def _decode_request_12_fast(b, bint little):
    """The compiled twin of ``fast12._decode_request_12_fast`` (None: the general decoder decides)."""
    cdef Py_buffer view
    PyObject_GetBuffer(b, &view, PyBUF_SIMPLE)
    try:
        return _request_at(<const uint8_t*>view.buf, view.len, little)
    finally:
        PyBuffer_Release(&view)


def _decode_reply_12_fast(b, bint little):
    """The compiled twin of ``fast12._decode_reply_12_fast``."""
    cdef Py_buffer view
    PyObject_GetBuffer(b, &view, PyBUF_SIMPLE)
    try:
        return _reply_at(<const uint8_t*>view.buf, view.len, little)
    finally:
        PyBuffer_Release(&view)


def _next_common(conn):
    """The compiled twin of ``connection._next_common``: the common message in one step, else None."""
    return _common(conn)


cdef object _common(conn):
    cdef Py_buffer view
    cdef const uint8_t* p
    cdef Py_ssize_t pos, n, end
    cdef uint32_t size
    cdef bint little
    cdef int kind
    cdef bint fast = _by_offset(conn)
    if _get(conn, fast, _HEADER, "_header") is not None or _get(conn, fast, _TRAINS, "_trains"):
        return None
    buf = _get(conn, fast, _BUF, "_buf")
    pos = _get(conn, fast, _POS, "_pos")
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        n = view.len
        if pos < 0 or n - pos < 12:
            return None
        p = <const uint8_t*>view.buf + pos
        # GIOP 1.2, no more-fragments flag, a Request (0) or a Reply (1).
        if not (p[0] == 71 and p[1] == 73 and p[2] == 79 and p[3] == 80 and p[4] == 1 and p[5] == 2
                and p[6] < 2 and p[7] < 2):
            return None
        little = p[6] & 1
        kind = p[7]
        entry = _HEADERS[(2 * 4 + p[6]) * 8 + kind]
        if entry is None or (<tuple>entry)[3] not in _get(conn, fast, _RECEIVES, "_receives"):
            return None
        size = _u32(p + 8, little)
        end = pos + 12 + size
        if size > _get(conn, fast, _MAX_SIZE, "max_message_size") or end > n:
            return None
        if kind == _REQUEST:
            msg = _request_at(p + 12, size, little)
            if msg is not None and msg.service_contexts and not _get(conn, fast, _CHOSEN, "code_sets_chosen"):
                return None
        else:
            msg = _reply_at(p + 12, size, little)
    finally:
        PyBuffer_Release(&view)
    if msg is not None:
        _put(conn, fast, _PEER_VERSION, "peer_version", _GIOP_1_2)
        _put(conn, fast, _PEER_LE, "peer_little_endian", bool(little))
        _put(conn, fast, _POS, "_pos", end)
    return msg


def encode_reply_12(request_id, status, body, little_endian):
    """The compiled twin of ``fast12.encode_reply_12``."""
    if (type(body) is not bytes or type(request_id) is not int or not 0 <= request_id <= 0xFFFFFFFF
            or not isinstance(status, int) or not 0 <= status <= 5 or type(little_endian) is not bool
            or len(body) > 0xFFFFFFFF - 12):
        return _py_encode_reply(request_id, status, body, little_endian)
    cdef bint little = bool(little_endian)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(body)
    out = PyBytes_FromStringAndSize(NULL, 24 + size)
    cdef uint8_t* p = <uint8_t*>PyBytes_AS_STRING(out)
    _giop_12_header(p, _REPLY, <uint32_t>(12 + size), little)
    _put_u32(p + 12, <uint32_t>request_id, little)
    _put_u32(p + 16, <uint32_t>status, little)
    _put_u32(p + 20, 0, little)
    if size:
        memcpy(p + 24, PyBytes_AS_STRING(body), size)
    return out



cdef inline Py_ssize_t _names_end(bytes object_key, bytes op):
    """Where a GIOP 1.2 Request's operation name ends (past its NUL)."""
    cdef Py_ssize_t key_len = PyBytes_GET_SIZE(object_key)
    return 28 + key_len + (-key_len & 3) + 4 + PyBytes_GET_SIZE(op) + 1


cdef void _request_start(uint8_t* p, Py_ssize_t end, Py_ssize_t body_len, uint32_t request_id, uint8_t flags,
                         bytes object_key, bytes op, bint little):
    """A GIOP 1.2 Request's bytes up to the operation's name: ``end`` bytes (the body's offset)
    zeroed first, then the header, the request id, the flags, the key and the operation."""
    cdef Py_ssize_t key_len = PyBytes_GET_SIZE(object_key)
    cdef Py_ssize_t op_len = PyBytes_GET_SIZE(op)
    cdef Py_ssize_t at = 28 + key_len + (-key_len & 3)
    memset(p, 0, end)
    _giop_12_header(p, _REQUEST, <uint32_t>(end + body_len - 12), little)
    _put_u32(p + 12, request_id, little)
    p[16] = flags
    _put_u32(p + 24, <uint32_t>key_len, little)
    memcpy(p + 28, PyBytes_AS_STRING(object_key), key_len)
    _put_u32(p + at, <uint32_t>(op_len + 1), little)
    memcpy(p + at + 4, PyBytes_AS_STRING(op), op_len)


def encode_request_12(request_id, response_flags, object_key, operation, body, little_endian):
    """The compiled twin of ``fast12.encode_request_12``."""
    if (type(object_key) is not bytes or type(operation) is not str or type(body) is not bytes
            or type(request_id) is not int or not 0 <= request_id <= 0xFFFFFFFF
            or type(response_flags) is not int or not 0 <= response_flags <= 255
            or type(little_endian) is not bool or len(object_key) > 0xFFFFFF or len(body) > 0xFFFFFF00
            or len(operation) > 0xFFFFFF):
        return _py_encode_request(request_id, response_flags, object_key, operation, body, little_endian)
    op = (<str>operation).encode("utf-8")
    cdef bint little = bool(little_endian)
    cdef Py_ssize_t body_len = PyBytes_GET_SIZE(body)
    # After the operation's NUL: padding to 4, an empty ServiceContextList, and padding to 8 before a body.
    cdef Py_ssize_t end = _names_end(object_key, op)
    end += -end & 3
    end += 4
    if body_len:
        end += -end & 7
    out = PyBytes_FromStringAndSize(NULL, end + body_len)
    cdef uint8_t* p = <uint8_t*>PyBytes_AS_STRING(out)
    _request_start(p, end, body_len, <uint32_t>request_id, <uint8_t>response_flags, object_key, op, little)
    if body_len:
        memcpy(p + end, PyBytes_AS_STRING(body), body_len)
    return out



def encode_request_12_contexts(request_id, response_flags, object_key, operation, contexts, body, little_endian):
    """The compiled twin of ``fast12.encode_request_12_contexts``."""
    if (type(object_key) is not bytes or type(operation) is not str or type(body) is not bytes
            or type(contexts) is not tuple or type(request_id) is not int or not 0 <= request_id <= 0xFFFFFFFF
            or type(response_flags) is not int or not 0 <= response_flags <= 255
            or type(little_endian) is not bool or len(object_key) > 0xFFFFFF or len(body) > 0xFFFFFF00
            or len(operation) > 0xFFFFFF or len(contexts) > 0xFFFF):
        return _py_encode_request_contexts(request_id, response_flags, object_key, operation, contexts, body,
                                           little_endian)
    cdef list ids = []
    cdef list datas = []
    cdef Py_ssize_t data_len = 0
    for context in <tuple>contexts:
        context_id = context.context_id
        data = context.data
        if (type(context_id) is not int or not 0 <= context_id <= 0xFFFFFFFF or type(data) is not bytes
                or len(data) > 0xFFFFFF):
            return _py_encode_request_contexts(request_id, response_flags, object_key, operation, contexts, body,
                                               little_endian)
        ids.append(context_id)
        datas.append(data)
    op = (<str>operation).encode("utf-8")
    cdef bint little = bool(little_endian)
    cdef Py_ssize_t body_len = PyBytes_GET_SIZE(body)
    cdef Py_ssize_t count = len(ids)
    cdef Py_ssize_t i, n
    # After the operation's NUL: padding to 4, the context count, each context
    # (its id 4-aligned, its length, its data), and padding to 8 before a body.
    cdef Py_ssize_t names_end = _names_end(object_key, op)
    cdef Py_ssize_t end = names_end
    end += -end & 3
    end += 4
    for i in range(count):
        end += -end & 3
        end += 8 + PyBytes_GET_SIZE(datas[i])
    if body_len:
        end += -end & 7
    out = PyBytes_FromStringAndSize(NULL, end + body_len)
    cdef uint8_t* p = <uint8_t*>PyBytes_AS_STRING(out)
    _request_start(p, end, body_len, <uint32_t>request_id, <uint8_t>response_flags, object_key, op, little)
    cdef Py_ssize_t at = names_end
    at += -at & 3
    _put_u32(p + at, <uint32_t>count, little)
    at += 4
    for i in range(count):
        at += -at & 3
        data = datas[i]
        n = PyBytes_GET_SIZE(data)
        _put_u32(p + at, <uint32_t>(<object>ids[i]), little)
        _put_u32(p + at + 4, <uint32_t>n, little)
        memcpy(p + at + 8, PyBytes_AS_STRING(data), n)
        at += 8 + n
    if body_len:
        memcpy(p + end, PyBytes_AS_STRING(body), body_len)
    return out

# The connection's per-read methods: all but the common case goes to their
# Python originals, found in ``twins.ORIGINALS`` on first need (twins imports
# this module, so not before).
cdef object _py_next_event = None
cdef object _py_receive_data = None


cdef object _original_next_event(conn):
    global _py_next_event
    if _py_next_event is None:
        from pyorb.giop.twins import ORIGINALS
        _py_next_event = ORIGINALS["GIOPConnection.next_event"]
    return _py_next_event(conn)


cdef object _original_receive_data(conn, data):
    global _py_receive_data
    if _py_receive_data is None:
        from pyorb.giop.twins import ORIGINALS
        _py_receive_data = ORIGINALS["GIOPConnection.receive_data"]
    return _py_receive_data(conn, data)


def next_event(conn):
    """The compiled twin of ``GIOPConnection.next_event``: NEED_DATA at the end
    of a read, or the common message; anything else is the original's."""
    cdef bint fast = _by_offset(conn)
    if _get(conn, fast, _ERROR, "_error") is not None:
        return _original_next_event(conn)
    buf = _get(conn, fast, _BUF, "_buf")
    if type(buf) is not bytearray:
        return _original_next_event(conn)
    cdef Py_ssize_t n = PyByteArray_GET_SIZE(buf)
    cdef Py_ssize_t pos = _get(conn, fast, _POS, "_pos")
    if pos == n and not _get(conn, fast, _EOF, "_eof"):  # all taken: the end of every read
        if pos:
            PyByteArray_Resize(buf, 0)  # the messages are copies: free the bytes now
            _put(conn, fast, _POS, "_pos", 0)
        return _NEED_DATA
    try:
        msg = _common(conn)
    except _ProtocolError:  # the original records the error before it raises it
        return _original_next_event(conn)
    if msg is not None:
        return msg
    return _original_next_event(conn)


def receive_data(conn, data):
    """The compiled twin of ``GIOPConnection.receive_data``, for a read's bytes
    arriving with nothing or a whole number of messages before them taken."""
    cdef bint fast = _by_offset(conn)
    buf = _get(conn, fast, _BUF, "_buf")
    if (type(data) is not bytes or not data or type(buf) is not bytearray
            or _get(conn, fast, _ERROR, "_error") is not None or _get(conn, fast, _EOF, "_eof")):
        return _original_receive_data(conn, data)
    cdef Py_ssize_t n = PyByteArray_GET_SIZE(buf)
    cdef Py_ssize_t pos = _get(conn, fast, _POS, "_pos")
    cdef Py_ssize_t size = PyBytes_GET_SIZE(data)
    if pos != n:
        return _original_receive_data(conn, data)
    PyByteArray_Resize(buf, size)
    memcpy(PyByteArray_AS_STRING(buf), PyBytes_AS_STRING(data), size)
    if pos:
        _put(conn, fast, _POS, "_pos", 0)
    return None
