# cython: language_level=3, boundscheck=False, wraparound=False
"""A body's one value in C: the compiled twins of ``BodyCodec.pack`` and ``BodyCodec.unpack``.

Most operations take or return one number, a struct of numbers or an enum,
and for those both methods hand the value straight to omniORB: in Python
that is a frame and a few slot reads around one marshal call, paid once per
request and once per reply.  These twins do that case (one padding-free
value at an aligned start, text read or written in UTF-8 if it holds any)
without the frame, reading the codec's slots at their offsets; every other
body goes to the Python originals, so errors and every other case come from
one place.  tests/test_body_twins.py checks that both give the same bytes,
values or errors.
"""

from omniORB import CORBA

from pyorb import _accelerator
from pyorb.giop._cframing cimport _get, _slot_offsets
from pyorb.giop.codesets import CS_UTF8
from pyorb.marshal.layout import DEFAULT_BOUNDS
from pyorb.marshal.orb import cdr_marshal, cdr_unmarshal

cdef object _UTF8 = CS_UTF8
cdef object _SystemException = CORBA.SystemException

# Bound on first use, not at import: the request and reply twins cimport this
# module, which may then be imported before pyorb.marshal.body, and body's own
# twin declaration imports it back.
cdef bint _bound = False
cdef object _BodyCodec = None
cdef object _original_pack = None  # the originals: every case but the common one
cdef object _original_unpack = None
cdef bint _KNOWN = False  # the codec's slots, at their offsets for a codec of exactly BodyCodec
cdef Py_ssize_t _SIMPLE, _STRINGS, _DESCS, _ONE


cdef int _bind() except -1:
    global _bound, _BodyCodec, _original_pack, _original_unpack, _KNOWN, _SIMPLE, _STRINGS, _DESCS, _ONE
    from pyorb.marshal import body
    _BodyCodec = body.BodyCodec
    _original_pack = _accelerator.original("pyorb.marshal.body.BodyCodec.pack")
    _original_unpack = _accelerator.original("pyorb.marshal.body.BodyCodec.unpack")
    offsets = _slot_offsets(_BodyCodec, ("_simple", "_strings", "_descs", "_one"))
    _KNOWN = offsets is not None
    if _KNOWN:
        _SIMPLE, _STRINGS, _DESCS, _ONE = offsets
    _bound = True
    return 0


cdef object pack_one(codec, value, char_set, little_endian):
    """The body of ``(value,)`` for ``codec`` at an aligned start if that is the common case (one
    padding-free value, text in UTF-8 if it holds any), else None; raises what omniORB raises,
    which each caller turns into its own error.  The request and reply writers' twins call it too."""
    if not _bound:
        _bind()
    cdef bint fast = _KNOWN and type(codec) is _BodyCodec
    if not _get(codec, fast, _SIMPLE, "_simple") or (char_set != _UTF8 and _get(codec, fast, _STRINGS, "_strings")):
        return None
    return cdr_marshal(_get(codec, fast, _DESCS, "_descs")[0], value, little_endian)


def pack(self, values, align, little_endian, char_set=_UTF8, wide11=False):
    """As :meth:`pyorb.marshal.body.BodyCodec.pack`."""
    if not _bound:
        _bind()
    if not (wide11 or type(values) is not tuple or len(<tuple>values) != 1 or align & 7):
        try:
            body = pack_one(self, (<tuple>values)[0], char_set, little_endian)
        except _SystemException:
            raise
        except Exception:  # the original's BAD_PARAM, chained to what omniORB raised
            body = None
        if body is not None:
            return body
    return _original_pack(self, values, align, little_endian, char_set, wide11)


def unpack(self, body, align, little_endian, fragment_starts=(), bounds=DEFAULT_BOUNDS,
           char_set=_UTF8, wide11=False):
    """As :meth:`pyorb.marshal.body.BodyCodec.unpack`."""
    if not _bound:
        _bind()
    cdef bint fast = _KNOWN and type(self) is _BodyCodec
    one = _get(self, fast, _ONE, "_one")
    if (one is None or align & 7 or fragment_starts
            or (char_set != _UTF8 and _get(self, fast, _STRINGS, "_strings"))):
        return _original_unpack(self, body, align, little_endian, fragment_starts, bounds, char_set, wide11)
    try:
        return (cdr_unmarshal(one, body, little_endian),)
    except _SystemException:
        raise
    except Exception:  # the original's MARSHAL, which says why
        return _original_unpack(self, body, align, little_endian, fragment_starts, bounds, char_set, wide11)
