"""Command-line text to IDL values and back, driven by omniidl type descriptors.

Numbers, booleans, characters, strings and enums are written plainly
(``42``, ``0x2a``, ``true``, ``green``); octet sequences as hex or ``@file``;
everything else as JSON (``'{"x": 1, "y": 2, "label": "p"}'``, ``@file``
also works).  Results go the other way, to JSON-compatible values.
Every mistake raises :class:`ArgumentError` with a one-line message.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable

from omniORB import CORBA

from pyorb.marshal.layout import (
    TV_ALIAS, TV_ANY, TV_ARRAY, TV_BOOLEAN, TV_CHAR, TV_DOUBLE, TV_ENUM, TV_EXCEPT, TV_FLOAT, TV_LONG,
    TV_LONGLONG, TV_NULL, TV_OBJREF, TV_OCTET, TV_SEQUENCE, TV_SHORT, TV_STRING, TV_STRUCT, TV_ULONG,
    TV_ULONGLONG, TV_UNION, TV_USHORT, TV_VOID, TV_WCHAR, TV_WSTRING,
)  # fmt: skip
from pyorb.giop.ior import parse_reference
from pyorb.marshal import Descriptor, ensure_orb

# kind -> (IDL name, lowest, highest)
_INTEGERS: dict[int, tuple[str, int, int]] = {
    TV_OCTET: ("octet", 0, 0xFF),
    TV_SHORT: ("short", -(2**15), 2**15 - 1),
    TV_USHORT: ("unsigned short", 0, 2**16 - 1),
    TV_LONG: ("long", -(2**31), 2**31 - 1),
    TV_ULONG: ("unsigned long", 0, 2**32 - 1),
    TV_LONGLONG: ("long long", -(2**63), 2**63 - 1),
    TV_ULONGLONG: ("unsigned long long", 0, 2**64 - 1),
}
_BASIC_NAMES = {
    TV_NULL: "null", TV_VOID: "void", TV_FLOAT: "float", TV_DOUBLE: "double", TV_BOOLEAN: "boolean",
    TV_CHAR: "char", TV_WCHAR: "wchar", TV_ANY: "any", 12: "TypeCode",
    **{k: v[0] for k, v in _INTEGERS.items()},
}  # fmt: skip
_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


class ArgumentError(ValueError):
    """A value that does not fit its IDL type."""


def type_name(desc: Descriptor) -> str:
    """The IDL spelling of a descriptor's type (``Point``, ``sequence<long>``)."""
    if isinstance(desc, int):
        return _BASIC_NAMES.get(desc, f"type #{desc}")
    kind = desc[0]
    if kind in (TV_STRING, TV_WSTRING):
        base = "string" if kind == TV_STRING else "wstring"
        return f"{base}<{desc[1]}>" if desc[1] else base
    if kind == TV_SEQUENCE:
        bound = f", {desc[2]}" if desc[2] else ""
        return f"sequence<{type_name(desc[1])}{bound}>"
    if kind == TV_ARRAY:  # long[2][3] nests as array(array(long, 3), 2)
        dims = ""
        while isinstance(desc, tuple) and desc[0] == TV_ARRAY:
            dims, desc = dims + f"[{desc[2]}]", desc[1]
        return type_name(desc) + dims
    if kind in (TV_STRUCT, TV_UNION, TV_EXCEPT):
        return str(desc[3])
    if kind in (TV_ENUM, TV_ALIAS, TV_OBJREF):
        return str(desc[2])
    return _BASIC_NAMES.get(kind, f"type #{kind}")


def _unalias(desc: Descriptor) -> Descriptor:
    while isinstance(desc, tuple) and desc[0] == TV_ALIAS:
        desc = desc[3]
    return desc


def _kind(desc: Descriptor) -> int:
    return desc if isinstance(desc, int) else int(desc[0])


def _is_octets(desc: Descriptor) -> bool:
    return _kind(desc) == TV_SEQUENCE and _unalias(desc[1]) == TV_OCTET


# -- command-line text to values -----------------------------------------------


def from_text(desc: Descriptor, text: str) -> Any:
    """The value of one command-line argument of type ``desc``."""
    desc = _unalias(desc)
    kind = _kind(desc)
    if kind in _INTEGERS:
        return _integer(kind, _parse_int(text, desc))
    if kind in (TV_FLOAT, TV_DOUBLE):
        return _parse_float(text, desc)
    if kind == TV_BOOLEAN:
        return _parse_bool(text)
    if kind in (TV_CHAR, TV_WCHAR, TV_STRING, TV_WSTRING, TV_OBJREF):
        return from_json(desc, text)
    if kind == TV_ENUM:
        return _enum(desc, text)
    if _is_octets(desc):
        return _octets(desc, _read_file(text[1:]) if text.startswith("@") else _hex(text))
    if kind == TV_ANY and not text.startswith("@"):
        try:
            return from_json(desc, json.loads(text))
        except json.JSONDecodeError:
            return from_json(desc, text)  # a bare word is a string
    return from_json(desc, _load_json(text, desc))


def _parse_int(text: str, desc: Descriptor) -> int:
    for base in (0, 10):  # 0x2a, 0o52, 0b101010; then 042, which base 0 refuses
        try:
            return int(text.strip(), base)
        except ValueError:
            pass
    raise ArgumentError(f"expected {type_name(desc)} (an integer), got {text!r}")


def _parse_float(text: str, desc: Descriptor) -> float:
    try:
        return float(text)
    except ValueError:
        raise ArgumentError(f"expected {type_name(desc)} (a number), got {text!r}") from None


def _parse_bool(text: str) -> bool:
    low = text.strip().lower()
    if low in _TRUE or low in _FALSE:
        return low in _TRUE
    raise ArgumentError(f"expected boolean (true or false), got {text!r}")


def _hex(text: str) -> bytes:
    digits = text.strip().removeprefix("0x").replace(" ", "").replace(":", "")
    try:
        return bytes.fromhex(digits)
    except ValueError:
        raise ArgumentError(f"expected octets as hex digits (or @file), got {text[:40]!r}") from None


def _read_file(name: str) -> bytes:
    try:
        return Path(name).read_bytes()
    except OSError as exc:
        raise ArgumentError(f"cannot read {name!r}: {exc.strerror or exc}") from None


def _load_json(text: str, desc: Descriptor) -> Any:
    if text.startswith("@"):
        text = _read_file(text[1:]).decode("utf-8", "replace")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ArgumentError(f"expected {type_name(desc)} as JSON, got {text[:40]!r} ({exc.msg})") from None


# -- JSON values to IDL values -------------------------------------------------


def from_json(desc: Descriptor, value: Any, where: str = "") -> Any:
    """Convert a JSON-decoded ``value`` to the Python mapping of ``desc``."""
    desc = _unalias(desc)
    kind = _kind(desc)
    handler = _FROM_JSON.get(kind)
    if handler is None:
        raise _fail(where, f"pyorb call cannot write {type_name(desc)} values")
    return handler(desc, value, where)


def _fail(where: str, message: str) -> ArgumentError:
    return ArgumentError(f"{where}: {message}" if where else message)


def _member(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _expect(ok: bool, desc: Descriptor, value: Any, where: str, what: str) -> None:
    if not ok:
        shown = json.dumps(value)[:40] if not isinstance(value, bytes) else value.hex()[:40]
        raise _fail(where, f"expected {type_name(desc)} ({what}), got {shown}")


def _integer(kind: int, value: int) -> int:
    name, low, high = _INTEGERS[kind]
    if not low <= value <= high:
        raise ArgumentError(f"{value} is out of range for {name} ({low}..{high})")
    return value


def _json_int(desc: Descriptor, value: Any, where: str) -> int:
    _expect(isinstance(value, int) and not isinstance(value, bool), desc, value, where, "an integer")
    try:
        return _integer(_kind(desc), value)
    except ArgumentError as exc:
        raise _fail(where, f"{exc}") from None


def _json_float(desc: Descriptor, value: Any, where: str) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    _expect(ok, desc, value, where, "a number")
    return float(value)


def _json_bool(desc: Descriptor, value: Any, where: str) -> bool:
    _expect(isinstance(value, bool), desc, value, where, "true or false")
    return bool(value)


def _json_char(desc: Descriptor, value: Any, where: str) -> str:
    _expect(isinstance(value, str) and len(value) == 1, desc, value, where, "one character")
    if desc == TV_CHAR and ord(value) > 0xFF:
        raise _fail(where, f"char holds one byte; {value!r} needs wchar")
    return str(value)


def _json_string(desc: Descriptor, value: Any, where: str) -> str:
    _expect(isinstance(value, str), desc, value, where, "a string")
    if desc[1] and len(value) > desc[1]:
        raise _fail(where, f"{type_name(desc)} holds at most {desc[1]} characters")
    if "\0" in value:
        raise _fail(where, f"IDL strings cannot contain NUL characters")
    return str(value)


def _enum(desc: Descriptor, name: Any, where: str = "") -> Any:
    items = desc[3]
    for item in items:
        if item._n == name:
            return item
    names = ", ".join(i._n for i in items)
    raise _fail(where, f"expected {type_name(desc)} (one of {names}), got {name!r}")


def _json_struct(desc: Descriptor, value: Any, where: str) -> Any:
    names, types = list(desc[4::2]), list(desc[5::2])
    if isinstance(value, list):
        _expect(len(value) == len(names), desc, value, where, f"{len(names)} members")
        value = dict(zip(names, value))
    _expect(isinstance(value, dict), desc, value, where, "a JSON object with members " + ", ".join(names))
    unknown = set(value) - set(names)
    if unknown:
        raise _fail(where, f"{type_name(desc)} has no member {sorted(unknown)[0]!r} "
                            f"(members: {', '.join(names)})")
    missing = [n for n in names if n not in value]
    if missing:
        raise _fail(where, f"{type_name(desc)} member {missing[0]!r} is missing")
    members = [from_json(t, value[n], _member(where, n)) for n, t in zip(names, types)]
    return desc[1](*members)


def _json_union(desc: Descriptor, value: Any, where: str) -> Any:
    cases = {name: (label, d) for label, name, d in desc[6]}
    shape = "a JSON object with one member: " + ", ".join(cases)
    _expect(isinstance(value, dict) and len(value) == 1, desc, value, where, shape)
    (name, member), = value.items()
    if name not in cases:
        raise _fail(where, f"{type_name(desc)} has no member {name!r} (members: {', '.join(cases)})")
    label, mdesc = cases[name]
    converted = from_json(mdesc, member, _member(where, name))
    default = desc[7]
    if default is not None and default[1] == name:
        return desc[1](**{name: converted})  # omniORB picks a discriminator no case uses
    return desc[1](label, converted)


def _json_sequence(desc: Descriptor, value: Any, where: str) -> Any:
    if _is_octets(desc):
        if isinstance(value, str):
            return _octets(desc, _hex(value))
        _expect(isinstance(value, list), desc, value, where, "hex digits or a list of numbers")
        return _octets(desc, bytes(_json_int(TV_OCTET, v, where) for v in value))
    if _unalias(desc[1]) in (TV_CHAR, TV_WCHAR) and isinstance(value, str):
        value = list(value)
    _expect(isinstance(value, list), desc, value, where, "a JSON array")
    if desc[2] and len(value) > desc[2]:
        raise _fail(where, f"{type_name(desc)} holds at most {desc[2]} elements")
    items = [from_json(desc[1], v, f"{where}[{i}]") for i, v in enumerate(value)]
    return "".join(items) if _unalias(desc[1]) in (TV_CHAR, TV_WCHAR) else items


def _octets(desc: Descriptor, data: bytes) -> bytes:
    if desc[2] and len(data) > desc[2]:
        raise ArgumentError(f"{type_name(desc)} holds at most {desc[2]} octets, got {len(data)}")
    return data


def _json_array(desc: Descriptor, value: Any, where: str) -> Any:
    if _unalias(desc[1]) == TV_OCTET and isinstance(value, str):
        value = list(_hex(value))
    _expect(isinstance(value, list) and len(value) == desc[2], desc, value, where, f"a JSON array of {desc[2]}")
    items = [from_json(desc[1], v, f"{where}[{i}]") for i, v in enumerate(value)]
    if _unalias(desc[1]) == TV_OCTET:
        return bytes(items)
    return "".join(items) if _unalias(desc[1]) in (TV_CHAR, TV_WCHAR) else items


def _json_any(desc: Descriptor, value: Any, where: str) -> Any:
    if value is None:
        return CORBA.Any(CORBA.TC_null, None)
    if isinstance(value, bool):
        return CORBA.Any(CORBA.TC_boolean, value)
    if isinstance(value, int):
        tc = CORBA.TC_long if -(2**31) <= value < 2**31 else CORBA.TC_longlong
        return CORBA.Any(tc, _json_int(_kind(tc._d), value, where))
    if isinstance(value, float):
        return CORBA.Any(CORBA.TC_double, value)
    if isinstance(value, str):
        return CORBA.Any(CORBA.TC_string, value)
    raise _fail(where, f"an any is written as null, true/false, a number or a string")


def _json_objref(desc: Descriptor, value: Any, where: str) -> Any:
    _expect(isinstance(value, str), desc, value, where, "an IOR or corbaloc string")
    if value.strip().lower() in ("", "nil", "null"):
        return None
    try:
        parse_reference(value)
    except ValueError as exc:
        raise _fail(where, f"{exc}") from None
    return ensure_orb().string_to_object(value.strip())


_FROM_JSON: dict[int, Callable[[Descriptor, Any, str], Any]] = {
    **{k: _json_int for k in _INTEGERS},
    TV_FLOAT: _json_float, TV_DOUBLE: _json_float, TV_BOOLEAN: _json_bool,
    TV_CHAR: _json_char, TV_WCHAR: _json_char, TV_STRING: _json_string, TV_WSTRING: _json_string,
    TV_ENUM: _enum, TV_STRUCT: _json_struct, TV_UNION: _json_union, TV_SEQUENCE: _json_sequence,
    TV_ARRAY: _json_array, TV_ANY: _json_any, TV_OBJREF: _json_objref,
}  # fmt: skip


# -- values to JSON ------------------------------------------------------------


def to_json(desc: Descriptor, value: Any) -> Any:
    """A JSON-compatible form of ``value``: enums by name, octets as hex,
    structs and exceptions as objects, unions as ``{member: value}``,
    object references as IOR strings."""
    desc = _unalias(desc)
    kind = _kind(desc)
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if kind == TV_ENUM:
        return value._n
    if kind in (TV_STRUCT, TV_EXCEPT):
        return {n: to_json(t, getattr(value, n)) for n, t in zip(desc[4::2], desc[5::2])}
    if kind == TV_UNION:
        return _union_to_json(desc, value)
    if kind in (TV_SEQUENCE, TV_ARRAY) and not isinstance(value, str):
        return [to_json(desc[1], v) for v in value]
    if kind == TV_ANY:
        return to_json(value._t._d, value._v)
    if kind == TV_OBJREF:
        return str(value) if not isinstance(value, CORBA.Object) else ensure_orb().object_to_string(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def _union_to_json(desc: Descriptor, value: Any) -> Any:
    case = desc[8].get(value._d) or desc[7]
    if case is None:
        return {"_d": to_json(desc[4], value._d)}
    return {case[1]: to_json(case[2], value._v)}
