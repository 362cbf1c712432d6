"""Marshaling operation bodies: arguments and results as one C call each.

An operation's in-arguments (or results) are marshaled as one synthetic
struct built from the omniidl descriptors, so a whole body is one call of
omniORB's marshaler.  A GIOP 1.2 body is 8-aligned, so the raw form fits
it directly; a GIOP 1.0/1.1 body starts wherever the header ended, so the
struct's first member is ``align`` padding octets, stripped after
marshaling (and prepended before unmarshaling).  Around that call: the
connection's char code set, the GIOP 1.1 form of wide text, object
references and zeroed padding.
"""

from __future__ import annotations

import collections
import logging
import re
from typing import Any, Callable, Iterable, cast

import omniORB
from omniORB import CORBA

from pyorb.giop.cdr import CDRReader
from pyorb.giop.errors import ProtocolError
from pyorb.giop.codesets import CODE_SET_CODECS, CS_UTF8
from pyorb import _accelerator
from pyorb.marshal import layout
from pyorb.marshal import wide
from pyorb.marshal.orb import Descriptor, cdr_marshal, cdr_unmarshal
from pyorb.marshal.references import ObjrefConverter, _has_objref, from_omni, to_omni, value_holds_objref
from pyorb.marshal.values import nested_value, resolve, values_can_nest
from pyorb.marshal.valuereader import read_values
from pyorb.marshal.valuewriter import write_values

log = logging.getLogger(__name__)

TV_ARRAY, TV_OCTET, TV_STRUCT = 20, 10, 15

_PRIMITIVE_SIZE = {2: 2, 3: 4, 4: 2, 5: 4, 6: 4, 7: 8, 8: 1, 9: 1, 10: 1, 23: 8, 24: 8}
TV_ENUM, TV_STRING = 17, 18


def _padding_free(descs: Iterable[Descriptor], pad: int) -> bool:
    """True if values of ``descs`` starting at ``pad`` can never need padding.

    That holds for naturally aligned runs of primitives, optionally ending
    with one string; anything else goes through the scrubber.
    """
    pos = pad
    items = [resolve(d) for d in descs]
    for i, desc in enumerate(items):
        kind = desc[0] if isinstance(desc, tuple) else desc
        size = 4 if kind == TV_ENUM else _PRIMITIVE_SIZE.get(kind) if isinstance(desc, int) else None
        if kind == TV_STRING and i == len(items) - 1:
            return pos % 4 == 0
        if size is None or pos % size:
            return False
        pos += size
    return True


def _padded(desc: Descriptor, names: list[str], descs: Iterable[Descriptor], pad: int) -> tuple[Any, ...]:
    members: list[Any] = []
    if pad:
        members += ["pad_", (TV_ARRAY, TV_OCTET, pad)]
    for name, d in zip(names, descs):
        members += [name, d]
    return (TV_STRUCT, desc, "", "body", *members)


# -- char code sets ----------------------------------------------------------
# omniORB marshals ``string`` in the process's native char code set, UTF-8.
# A connection whose transmission code set (TCS-C) is another one gets its
# bodies' strings re-encoded on the way out and in; ``char`` is one octet
# either way and needs nothing.


def _recoder(char_set: int, outgoing: bool) -> Callable[[bytes], bytes]:
    """Re-encodes a string's octets from UTF-8 (omniORB's) into ``char_set``, or back."""
    codec = CODE_SET_CODECS.get(char_set)
    if codec is None:
        raise CORBA.CODESET_INCOMPATIBLE(0, CORBA.COMPLETED_NO)
    source, target = ("utf-8", codec) if outgoing else (codec, "utf-8")
    minor = omniORB.DATA_CONVERSION_CannotMapChar if outgoing else omniORB.DATA_CONVERSION_BadInput
    why = f"a string holds a character {codec} cannot encode" if outgoing else f"a string is not valid {codec}"

    def recode(octets: bytes) -> bytes:
        try:
            return octets.decode(source).encode(target)
        except UnicodeError:
            raise CORBA.DATA_CONVERSION(minor, CORBA.COMPLETED_NO, why) from None

    return recode


class BodyCodec:
    """Marshals a fixed list of types (arguments or results) as one body.

    One codec per (types, padding); ``pack`` and ``unpack`` take and return
    plain tuples.
    """

    __slots__ = ("count", "_descs", "_read_descs", "_wide", "_structs", "_classes", "_objrefs", "_no_padding", "_simple",
                 "_bounded", "_strings", "_giop11", "_one", "_nesting", "_prepare", "_value_refs", "_valued",
                 "_value_wide")

    def __init__(self, descs: tuple[Descriptor, ...]) -> None:
        self.count = len(descs)
        self._descs = descs
        # omniORBpy 4.3.3 misreads a GIOP 1.2 wchar: read it as raw octets.
        self._read_descs = tuple(wide.read_descriptor(d) for d in descs)
        self._wide = self._read_descs != descs
        self._structs: dict[tuple[int, bool], tuple[Any, ...]] = {}
        self._classes: dict[int, type] = {}
        self._objrefs = any(_has_objref(d) for d in descs)
        self._no_padding: dict[int, bool] = {}
        self._simple = len(descs) == 1 and not self._objrefs and _padding_free(descs, 0)
        # Bodies that can nest without limit (any, TypeCode, value types) are walked
        # before omniORB unmarshals them.
        self._bounded = layout.needs_bounds(descs)
        # omniORB's marshaler aborts the process on a value inside a value's state:
        # such bodies are checked before it sees them.
        self._nesting = values_can_nest(descs)
        # Received bodies pyorb's value reader may take: any holding a value (a derived or truncated
        # value may nest values in state its declared type lacks).
        self._valued = values_can_nest(descs, True)
        # omniORB's marshaler takes only its own references, and pyorb cannot swap them into a value
        # it must not change: bodies whose values can hold references are written by pyorb.
        self._value_refs = any(value_holds_objref(d) for d in descs)
        self._prepare = self._objrefs or self._nesting  # (one test on the hot path for plain bodies)
        self._strings = layout.has_strings(descs)  # bodies that change with the char code set
        # Wide text in the GIOP 1.1 form: the same values through stand-in types (see pyorb.wide).
        descs11 = tuple(wide.giop11_descriptor(d) for d in descs)
        self._giop11 = BodyCodec(descs11) if descs11 != descs else None
        # Wide text in a value's state: the stand-in types cannot reach it (omniORB marshals a value's
        # state by its own descriptor), so those bodies take pyorb's value writer and reader in GIOP 1.1.
        self._value_wide = wide.in_values(descs)
        # One value omniORB reads straight from an aligned body, with nothing
        # to check, convert or restore first (a ping's stamp, a reply's long):
        # unpack's plan for its common case, fixed here once.
        self._one = (self._read_descs[0] if self.count == 1 and not (self._bounded or self._objrefs or self._wide)
                     and self._giop11 is None else None)

    def _struct(self, pad: int, read: bool = False) -> tuple[tuple[Any, ...], type]:
        struct = self._structs.get((pad, read))
        if struct is None:
            names = [f"a{i}" for i in range(self.count)]
            cls = self._classes.get(pad)
            if cls is None:
                fields = (["pad_"] if pad else []) + names
                cls = self._classes[pad] = collections.namedtuple("Body", fields)
            struct = _padded(cls, names, self._read_descs if read else self._descs, pad)
            self._structs[(pad, read)] = struct
        return struct, self._classes[pad]

    def pack(
        self, values: tuple[Any, ...], align: int, little_endian: bool, char_set: int = CS_UTF8, wide11: bool = False,
    ) -> bytes:
        """Marshal ``values`` for a body starting at ``align`` (mod 8), strings
        in the connection's ``char_set`` (DATA_CONVERSION if one holds a
        character that code set lacks), wide text in the GIOP 1.1 form if
        ``wide11`` (else the GIOP 1.2 form)."""
        if wide11 and self._value_wide:
            return self._write_values(values, align, little_endian, char_set, True)
        if wide11 and self._giop11 is not None:
            if len(values) != self.count:
                raise CORBA.BAD_PARAM(0, CORBA.COMPLETED_NO)
            try:
                units = tuple(wide.to_giop11(d, v) for d, v in zip(self._descs, values))
            except CORBA.SystemException:
                raise
            except Exception as exc:  # a Python value of the wrong type
                raise CORBA.BAD_PARAM(0, CORBA.COMPLETED_NO) from exc
            return self._giop11.pack(units, align, little_endian, char_set)
        if char_set != CS_UTF8 and self._strings:
            return self._pack_in(values, align, little_endian, char_set)
        if self._simple and not align & 7 and len(values) == 1:
            # One padding-free value at an aligned start (a ping's stamp, a
            # reply's long): straight to omniORB, nothing to convert or scrub.
            try:
                return cdr_marshal(self._descs[0], values[0], little_endian)
            except CORBA.SystemException:
                raise
            except Exception as exc:
                raise CORBA.BAD_PARAM(0, CORBA.COMPLETED_NO) from exc
        if not self.count:
            return b""
        if len(values) != self.count:
            raise CORBA.BAD_PARAM(0, CORBA.COMPLETED_NO)
        pad = align % 8
        try:
            if self._prepare:
                if self._writes_values(values):
                    return write_values(self._descs, values, pad, little_endian, _leaf)
                values = self._prepared(values)
            if self.count == 1 and not pad:  # one value needs no wrapping struct
                body = cdr_marshal(self._descs[0], values[0], little_endian)
            else:
                struct, cls = self._struct(pad)
                if pad:
                    body = cdr_marshal(struct, cls(bytes(pad), *values), little_endian)[pad:]
                else:
                    body = cdr_marshal(struct, cls(*values), little_endian)
        except CORBA.SystemException:
            raise
        except Exception as exc:  # a Python value of the wrong type
            raise CORBA.BAD_PARAM(0, CORBA.COMPLETED_NO) from exc
        return body if self._padding_free(pad) else self._scrub(body, pad, little_endian)

    def _writes_values(self, values: tuple[Any, ...]) -> bool:
        """Whether pyorb's value writer writes this body: a value inside a value's state, or
        value types whose state can hold a reference (omniORB's marshaler takes neither)."""
        return self._value_refs or (self._nesting and any(nested_value(d, v) for d, v in zip(self._descs, values)))

    def _prepared(self, values: tuple[Any, ...]) -> tuple[Any, ...]:
        """``values`` as omniORB's marshaler takes them: object references its own."""
        if self._objrefs:
            values = tuple(to_omni(d, v) for d, v in zip(self._descs, values))
        return values

    def _pack_in(self, values: tuple[Any, ...], align: int, little_endian: bool, char_set: int) -> bytes:
        if self._writes_values(values):
            # The walk below cannot move a value inside a value (its chunk lengths and indirections
            # would shift), so the value writer re-encodes each of its leaves as it writes it.
            return self._write_values(values, align, little_endian, char_set, False)
        body = self.pack(values, align, little_endian)
        try:
            recode = _recoder(char_set, outgoing=True)
            return layout.transcode_strings(self._descs, body, little_endian, align % 8, recode)
        except ValueError as exc:
            raise CORBA.MARSHAL(0, CORBA.COMPLETED_NO, f"cannot send {exc}: pyorb does not marshal it") from None

    def _write_values(self, values: tuple[Any, ...], align: int, little_endian: bool, char_set: int,
                      wide11: bool) -> bytes:
        """The body by pyorb's value writer, each leaf marshaled by omniORB in ``char_set``, wide
        text in the GIOP 1.1 form if ``wide11``."""
        if len(values) != self.count:
            raise CORBA.BAD_PARAM(0, CORBA.COMPLETED_NO)

        def leaf(desc: Descriptor, value: Any, at: int, le: bool) -> bytes:
            return _leaf_codec(desc).pack((value,), at, le, char_set, wide11)

        try:
            return write_values(self._descs, values, align % 8, little_endian, leaf, open_anys=wide11)
        except CORBA.SystemException:
            raise
        except Exception as exc:  # a Python value of the wrong type
            raise CORBA.BAD_PARAM(0, CORBA.COMPLETED_NO) from exc

    @property
    def has_wide(self) -> bool:
        """Whether the GIOP 1.1 form of these values differs from the GIOP 1.2 form (wchar, wstring)."""
        return self._giop11 is not None or self._value_wide

    @property
    def has_objrefs(self) -> bool:
        return self._objrefs

    def convert_objrefs(self, values: tuple[Any, ...], convert: ObjrefConverter) -> tuple[Any, ...]:
        """``values`` with the omniORB object references in them passed through ``convert``."""
        if not self._objrefs:
            return values
        return tuple(from_omni(d, v, convert) for d, v in zip(self._descs, values))

    def _padding_free(self, pad: int) -> bool:
        free = self._no_padding.get(pad)
        if free is None:
            free = self._no_padding[pad] = _padding_free(self._descs, pad)
        return free

    def _scrub(self, body: bytes, pad: int, little_endian: bool) -> bytes:
        # omniORB leaves alignment padding uninitialised: process memory
        # must not leave the process, so every padding byte is zeroed.
        # A body that cannot be walked (an abstract interface) is refused, never sent unscrubbed.
        buf = bytearray(body)
        try:
            layout.zero_padding(self._descs, buf, little_endian, pad)
        except ValueError as exc:
            raise CORBA.MARSHAL(getattr(exc, "minor", 0), CORBA.COMPLETED_NO,
                                f"cannot send {exc}: pyorb does not marshal it") from None
        return bytes(buf)

    def unpack(
        self, body: bytes, align: int, little_endian: bool, fragment_starts: tuple[int, ...] = (),
        bounds: layout.Bounds = layout.DEFAULT_BOUNDS, char_set: int = CS_UTF8, wide11: bool = False,
    ) -> tuple[Any, ...]:
        """Unmarshal a body that started at ``align`` (mod 8).

        ``fragment_starts`` (GIOP 1.1 only) are the offsets where Fragment
        payloads began: omniORB aligns each relative to its own fragment.
        Every body that can hold an any, a TypeCode or a recursive type is checked against
        ``bounds`` whichever the char code set, GIOP version, fragmentation
        or byte order; one past them raises MARSHAL before omniORB's
        unmarshaler sees it.  Strings are read in the connection's
        ``char_set``, wide text in the GIOP 1.1 form if ``wide11``.
        """
        one = self._one
        if one is not None and not (align & 7 or fragment_starts) and (char_set == CS_UTF8 or not self._strings):
            try:
                return (cdr_unmarshal(one, body, little_endian),)
            except CORBA.SystemException:
                raise
            except Exception as exc:
                raise _undecodable(exc) from exc
        if not self.count:
            return ()
        if wide11 and self._value_wide:
            return self._read_values(body, align % 8, little_endian, fragment_starts, bounds, char_set, True)
        if wide11 and self._giop11 is not None:
            units = self._giop11.unpack(body, align, little_endian, fragment_starts, bounds, char_set)
            return tuple(wide.from_giop11(d, v) for d, v in zip(self._descs, units))
        pad = align % 8
        if self._bounded or fragment_starts or (char_set != CS_UTF8 and self._strings):
            try:
                body = self._received(body, pad, little_endian, fragment_starts, bounds, char_set)
            except layout.NestedValueError as exc:
                try:
                    return self._read_values(body, pad, little_endian, fragment_starts, bounds, char_set, False)
                except layout.NestedValueError:  # in an any, which the reader leaves to omniORB: the walk's refusal
                    raise CORBA.MARSHAL(0, CORBA.COMPLETED_NO, f"unacceptable body: {exc}") from None
        try:
            if self.count == 1 and not pad:
                values: tuple[Any, ...] = (cdr_unmarshal(self._read_descs[0], body, little_endian),)
            else:
                struct, _ = self._struct(pad, read=True)
                data = bytes(pad) + body if pad else body
                values = tuple(cdr_unmarshal(struct, data, little_endian))
                values = values[1:] if pad else values
            if self._wide:
                values = tuple(wide.restore(d, v) for d, v in zip(self._descs, values))
        except CORBA.SystemException:
            raise
        except Exception as exc:
            raise _undecodable(exc) from exc
        return values

    def _received(
        self, body: bytes, pad: int, little_endian: bool, fragment_starts: tuple[int, ...], bounds: layout.Bounds,
        char_set: int,
    ) -> bytes:
        """``body`` as omniORB's unmarshaler may read it: the one walk of a received body
        that can hold an any, a TypeCode or a recursive type, came in GIOP 1.1 fragments or has
        strings in another char code set, and every walk checks ``bounds``.

        (:meth:`unpack` calls it for those bodies only: the octets of any other bound it all.)
        """
        text = _recoder(char_set, outgoing=False) if char_set != CS_UTF8 and self._strings else None
        try:
            # Wide characters stay in the GIOP 1.2 form: omniORB sends that form
            # in 1.1 too once UTF-16 is negotiated, and cdrUnmarshal reads it.
            return layout.received(self._descs, body, little_endian, pad, bounds, fragment_starts=fragment_starts,
                                   text=text, giop_minor=2)
        except layout.NestedValueError as exc:
            if not self._valued:
                raise CORBA.MARSHAL(0, CORBA.COMPLETED_NO, f"unacceptable body: {exc}") from None
            raise  # read by pyorb's value reader
        except ValueError as exc:
            raise CORBA.MARSHAL(getattr(exc, "minor", 0), CORBA.COMPLETED_NO, f"unacceptable body: {exc}") from None

    def _read_values(
        self, body: bytes, pad: int, little_endian: bool, fragment_starts: tuple[int, ...], bounds: layout.Bounds,
        char_set: int, wide11: bool,
    ) -> tuple[Any, ...]:
        """The body read by pyorb's value reader: one holding a chunked value inside a chunked value
        (omniORB's unmarshaler aborts on one), or wide text in a value's state in the GIOP 1.1 form
        (``wide11``); its leaves still by omniORB.  Raises NestedValueError for a value inside a
        value inside an any (which the reader leaves to omniORB)."""

        def leaf(desc: Descriptor, octets: bytes, align: int) -> Any:
            return _leaf_codec(desc).unpack(octets, align, little_endian, (), bounds, char_set, wide11)[0]

        try:
            return read_values(self._descs, body, pad, little_endian, bounds, leaf, fragment_starts,
                               giop_minor=1 if wide11 else 2)
        except layout.NestedValueError as exc:
            if wide11:
                raise CORBA.MARSHAL(0, CORBA.COMPLETED_NO, f"unacceptable body: {exc}") from None
            raise
        except ValueError as exc:
            raise CORBA.MARSHAL(getattr(exc, "minor", 0), CORBA.COMPLETED_NO, f"unacceptable body: {exc}") from None


_leaf_codecs: dict[int, tuple[Descriptor, BodyCodec]] = {}


def _leaf(desc: Descriptor, value: Any, align: int, little_endian: bool) -> bytes:
    """One value holding no value type, marshaled by omniORB from ``align`` (the value writer's leaves)."""
    return _leaf_codec(desc).pack((value,), align, little_endian)


def _leaf_codec(desc: Descriptor) -> BodyCodec:
    """The codec of one type holding no value type (the value writer's and reader's leaves)."""
    hit = _leaf_codecs.get(id(desc))
    if hit is None:  # descriptors are long-lived: cached by identity, the entry keeps one alive
        if len(_leaf_codecs) > 4096:
            _leaf_codecs.clear()
        hit = _leaf_codecs[id(desc)] = (desc, BodyCodec((desc,)))
    return hit[1]


def _undecodable(exc: Exception) -> CORBA.SystemException:
    return CORBA.MARSHAL(0, CORBA.COMPLETED_NO, f"the body does not decode as its IDL types say ({exc})")


class Operation:
    """Everything needed to marshal one IDL operation, from its descriptor.

    ``descriptor`` is omniidl's ``(in types, out types, exceptions)`` where
    out types list the return value first (absent for void) then inout/out.
    ``out types`` is None for a oneway operation.  ``interface`` is the
    repository id of the interface it was called through, for error texts.
    """

    __slots__ = ("name", "oneway", "args", "results", "exceptions", "interface", "_result_shape", "_exc_codecs")

    def __init__(self, name: str, descriptor: tuple[Any, ...], interface: str = "") -> None:
        in_types, out_types, excs = descriptor[:3]
        self.name = name
        self.interface = interface
        self.oneway = out_types is None
        self.args = BodyCodec(tuple(in_types))
        self.results = BodyCodec(tuple(out_types or ()))
        self.exceptions: dict[str, Descriptor] = dict(excs or {})
        self._result_shape = len(out_types or ())
        self._exc_codecs: dict[str, BodyCodec] = {}

    def result_value(self, values: tuple[Any, ...]) -> Any:
        """omniORBpy's mapping: None, a single value, or a tuple."""
        if self._result_shape == 0:
            return None
        if self._result_shape == 1:
            return values[0]
        return values

    def reply_value(
        self, body: bytes, align: int, little_endian: bool, fragment_starts: tuple[int, ...],
        bounds: layout.Bounds, char_set: int, wide11: bool, convert: ObjrefConverter,
    ) -> Any:
        """The value a NO_EXCEPTION reply's body carries, as :meth:`result_value`
        maps it, its object references passed through ``convert`` (see
        :meth:`BodyCodec.unpack` for the rest)."""
        results = self.results
        values = results.unpack(body, align, little_endian, fragment_starts, bounds, char_set, wide11)
        if results._objrefs:
            values = results.convert_objrefs(values, convert)
        shape = self._result_shape
        return values[0] if shape == 1 else None if shape == 0 else values

    def result_tuple(self, value: Any) -> tuple[Any, ...]:
        """The inverse of :meth:`result_value`, checking the shape."""
        if self._result_shape == 0:
            return ()
        if self._result_shape == 1:
            return (value,)
        if not isinstance(value, tuple) or len(value) != self._result_shape:
            raise CORBA.BAD_PARAM(0, CORBA.COMPLETED_MAYBE)
        return value

    def arity_error(self, given: int) -> TypeError:
        """What calling with ``given`` arguments raises (worded as omniORBpy's, with the name)."""
        need = self.args.count
        return TypeError(f"Operation '{self.name}' requires {need} argument{'s' * (need != 1)}; {given} given")

    def argument_error(self, values: tuple[Any, ...], exc: CORBA.SystemException) -> CORBA.SystemException:
        """``exc`` (from packing ``values``) naming this operation, the parameter
        that did not marshal (counted from 0, as omniORBpy counts) and the member
        or item inside it, with omniORB's minor code; the slow path of a failed call."""
        if len(values) != self.args.count:
            return CORBA.BAD_PARAM(exc.minor, CORBA.COMPLETED_NO, str(self.arity_error(len(values))))
        for i, (desc, value) in enumerate(zip(self.args._descs, values)):
            try:
                cdr_marshal(desc, to_omni(desc, value), True)
            except CORBA.SystemException as one:
                info = getattr(one, "_info", None)
                why = info[0] if isinstance(info, list) and info else type(one).__name__
                inside = member_path(info[1:]) if isinstance(info, list) else ""
                return type(one)(one.minor, CORBA.COMPLETED_NO, f"Operation '{self.name}' parameter {i}{inside}: {why}")
            except Exception as one:  # not a CORBA error: a value omniORB cannot take at all
                return CORBA.BAD_PARAM(omniORB.BAD_PARAM_WrongPythonType, CORBA.COMPLETED_NO,
                                       f"Operation '{self.name}' parameter {i}: {one}")
        return exc

    def pack_user_exception(
        self, exc: CORBA.UserException, align: int, le: bool, char_set: int = CS_UTF8, wide11: bool = False
    ) -> bytes:
        codec = self._exception_codec(getattr(exc, "_NP_RepositoryId", ""))
        if codec is None:
            raise CORBA.UNKNOWN(0, CORBA.COMPLETED_MAYBE)
        return codec.pack((exc,), align, le, char_set, wide11)

    def unpack_user_exception(
        self, body: bytes, align: int, le: bool, bounds: layout.Bounds = layout.DEFAULT_BOUNDS,
        char_set: int = CS_UTF8, wide11: bool = False, fragment_starts: tuple[int, ...] = (),
    ) -> Exception:
        """The user exception a USER_EXCEPTION reply's body carries (see
        :meth:`BodyCodec.unpack` for the arguments); MARSHAL if the body does not
        start with a repository id, UNKNOWN if this operation does not raise it."""
        try:
            repo_id = CDRReader(body, le, base=align).string()
        except ProtocolError:
            return cast(Exception, CORBA.MARSHAL(0, CORBA.COMPLETED_YES,
                                                 f"the user exception {self.name} raised cannot be read: no repository id"))
        codec = self._exception_codec(repo_id)
        if codec is None:
            return cast(Exception, CORBA.UNKNOWN(omniORB.UNKNOWN_UserException, CORBA.COMPLETED_YES,
                                                 f"{self.name} raised {repo_id}, which its IDL here does not declare"))
        (exc,) = codec.unpack(body, align, le, fragment_starts, bounds, char_set, wide11)
        return cast(Exception, exc)

    def convert_exception(self, exc: Exception, convert: ObjrefConverter) -> Exception:
        """``exc`` (a user exception of this operation) with its object references passed through ``convert``."""
        desc = self.exceptions.get(getattr(exc, "_NP_RepositoryId", ""))
        if desc is None or not _has_objref(desc):
            return exc
        return cast(Exception, from_omni(desc, exc, convert))

    def _exception_codec(self, repo_id: str) -> BodyCodec | None:
        codec = self._exc_codecs.get(repo_id)
        if codec is None and repo_id in self.exceptions:
            codec = self._exc_codecs[repo_id] = BodyCodec((self.exceptions[repo_id],))
        return codec


def member_path(contexts: Iterable[Any]) -> str:
    """Where inside a value omniORB's marshaler failed, from the contexts it adds
    innermost first (``Struct 'Item' member 'qty'``, ``Sequence item 2``):
    `` item 2, member Item.qty``; empty if it named none."""
    steps = []
    for context in reversed(list(contexts)):
        text = str(context)
        struct = re.fullmatch(r"(?:Struct|Exception|Value) '(.*)' member '(.*)'", text)
        if struct:
            steps.append(f"member {struct[1]}.{struct[2]}")
        elif text.startswith(("Sequence item ", "Array item ")):
            steps.append("item " + text.rsplit(" ", 1)[1])
        elif text:
            steps.append(text[0].lower() + text[1:])
    return "".join(", " + step for step in steps)


def operation_descriptors(interface: type) -> dict[str, tuple[Any, ...]]:
    """The operations of a generated stub class, inherited ones too, by wire
    name: omniidl's ``_d_<op>`` descriptors ``(in types, out types or None
    for oneway, exceptions, ...)``, not the ``_d_<Type>`` of types declared inside."""
    found: dict[str, tuple[Any, ...]] = {}
    for name in dir(interface):
        if name.startswith("_d_"):
            desc = getattr(interface, name)
            # A type descriptor starts with its kind number, an operation's with the tuple of its
            # in types (omniidl adds two more items to the three when values are involved).
            if isinstance(desc, tuple) and len(desc) >= 3 and isinstance(desc[0], tuple):
                found[name[3:]] = desc
    return found


# The CORBA::Object operations every object answers, known to both sides.
IS_A = Operation("_is_a", (((18, 0),), (8,), None))
NON_EXISTENT = Operation("_non_existent", ((), (8,), None))


# With the compiled accelerator, the C twins take their places: once per request and reply a body is read or written.
_accelerator.twin(__name__, "BodyCodec.pack", "pyorb.marshal._cbody")
_accelerator.twin(__name__, "BodyCodec.unpack", "pyorb.marshal._cbody")
