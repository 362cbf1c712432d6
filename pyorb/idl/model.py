"""omniidl's AST as plain data, for the stub generator (:mod:`pyorb.idl.stubs`).

This module is an omniidl back end: ``omniidl -bpyorb.idl.model file.idl``
prints, for each IDL file, one JSON line describing the declarations the file
itself makes (not those of files it includes), grouped by Python module.
Running omniidl in a subprocess keeps its preprocessor, include paths and
process-wide state out of the caller; the JSON keeps the generator free of
omniidl's AST classes.

The model (all lists and dicts, so that it survives JSON):

* a type is ``["b", pyname]`` for a type mapped to a builtin (``int``,
  ``float``, ``bool``, ``str``, ``bytes``, ``Any``), ``["seq", type]``,
  ``["ref", module, path, kind]`` for a struct, union, exception or enum,
  ``["alias", module, path, type]`` for a typedef and ``["obj", module, path]``
  for an interface (module and path None for ``CORBA::Object``);
* a module is ``{"module": "A.B", "decls": [...]}``; a declaration is a dict
  with ``kind`` (struct, exception, union, enum, alias, const, interface) and
  ``name`` (the Python name, keywords escaped as omniidl does).
"""

from __future__ import annotations

import json
import keyword
import sys
from typing import Any

from omniidl import idlast, idltype  # type: ignore[import-untyped]

Model = dict[str, Any]

_BUILTIN = {
    idltype.tk_short: "int", idltype.tk_long: "int", idltype.tk_ushort: "int", idltype.tk_ulong: "int",
    idltype.tk_longlong: "int", idltype.tk_ulonglong: "int", idltype.tk_octet: "int",
    idltype.tk_float: "float", idltype.tk_double: "float", idltype.tk_longdouble: "float",
    idltype.tk_boolean: "bool", idltype.tk_char: "str", idltype.tk_wchar: "str",
    idltype.tk_string: "str", idltype.tk_wstring: "str",
}
_NAMED_KINDS = {
    idltype.tk_struct: "struct", idltype.tk_union: "union", idltype.tk_except: "exception", idltype.tk_enum: "enum",
}
_DIRECTIONS = ("in", "out", "inout")


def py_id(name: str) -> str:
    """omniidl's Python name for an IDL identifier (keywords get a ``_``)."""
    return "_" + name if keyword.iskeyword(name) else name


def _split(scoped_name: list[str]) -> tuple[str, str]:
    """(Python module, attribute path) of a scoped name."""
    depth = 0
    while depth < len(scoped_name) - 1 and isinstance(idlast.findDecl(scoped_name[: depth + 1]), idlast.Module):
        depth += 1
    module = ".".join(py_id(n) for n in scoped_name[:depth]) or "_GlobalIDL"
    return module, ".".join(py_id(n) for n in scoped_name[depth:])


def type_of(t: Any, sizes: list[int] | tuple[int, ...] = ()) -> list[Any]:
    """The model of IDL type ``t`` (an array of ``sizes`` of it, if given)."""
    if sizes:
        return _array(t, list(sizes))
    kind = t.kind()
    if kind in _BUILTIN:
        return ["b", _BUILTIN[kind]]
    if kind == idltype.tk_sequence:
        return _array(t.seqType(), [0])
    if kind in (idltype.tk_objref, idltype.tk_abstract_interface, idltype.tk_local_interface):
        if t.scopedName() == ["CORBA", "Object"]:
            return ["obj", None, None]
        return ["obj", *_split(t.scopedName())]
    if kind == idltype.tk_alias:
        decl = t.decl()
        return ["alias", *_split(decl.scopedName()), type_of(decl.alias().aliasType(), decl.sizes())]
    if kind in _NAMED_KINDS:
        return ["ref", *_split(t.scopedName()), _NAMED_KINDS[kind]]
    return ["b", "Any"]  # any, TypeCode, fixed, value types: no precise mapping


def _array(element: Any, sizes: list[int]) -> list[Any]:
    # omniORBpy maps the innermost dimension of octets/chars to bytes/str.
    inner = element.unalias().kind()
    if inner == idltype.tk_octet:
        result: list[Any] = ["b", "bytes"]
    elif inner == idltype.tk_char:
        result = ["b", "str"]
    else:
        result = ["seq", type_of(element)]
    for _ in sizes[1:]:
        result = ["seq", result]
    return result


def _fields(members: list[Any]) -> list[list[Any]]:
    return [[py_id(d.identifier()), type_of(m.memberType(), d.sizes())] for m in members for d in m.declarators()]


def _operation(op: Any) -> Model:
    ret = op.returnType()
    return {
        "name": py_id(op.identifier()),
        "oneway": bool(op.oneway()),
        "ret": None if ret.kind() == idltype.tk_void else type_of(ret),
        "params": [[py_id(p.identifier()), _DIRECTIONS[p.direction()], type_of(p.paramType())]
                   for p in op.parameters()],
        "raises": [list(_split(e.scopedName())) for e in op.raises()],
    }


def _attribute_ops(attr: Any) -> list[Model]:
    ops = []
    for name in attr.identifiers():
        t = type_of(attr.attrType())
        ops.append({"name": "_get_" + name, "oneway": False, "ret": t, "params": [], "raises": []})
        if not attr.readonly():
            params = [["value", "in", t]]
            ops.append({"name": "_set_" + name, "oneway": False, "ret": None, "params": params, "raises": []})
    return ops


def _own_ops(iface: Any) -> list[Model]:
    ops: list[Model] = []
    for c in iface.contents():
        if isinstance(c, idlast.Operation):
            ops.append(_operation(c))
        elif isinstance(c, idlast.Attribute):
            ops.extend(_attribute_ops(c))
    return ops


def _all_ops(iface: Any) -> list[Model]:
    """Own and inherited operations, each once (the skeleton's view)."""
    seen: dict[str, Model] = {}
    for base in iface.inherits():
        for op in _all_ops(base.fullDecl()):
            seen.setdefault(op["name"], op)
    for op in _own_ops(iface):
        seen[op["name"]] = op
    return list(seen.values())


def _interface(iface: Any) -> Model:
    return {
        "kind": "interface",
        "name": py_id(iface.identifier()),
        "repo_id": iface.repoId(),
        "bases": [list(_split(b.fullDecl().scopedName())) for b in iface.inherits()],
        "ops": _own_ops(iface),
        "all_ops": _all_ops(iface),
        "nested": _decls(iface.contents()),
    }


def _decl(d: Any) -> list[Model]:
    if isinstance(d, (idlast.Struct, idlast.Exception)):
        kind = "struct" if isinstance(d, idlast.Struct) else "exception"
        return [{"kind": kind, "name": py_id(d.identifier()), "fields": _fields(d.members()), "nested": _inline(d)}]
    if isinstance(d, idlast.Union):
        cases = [[py_id(c.declarator().identifier()), type_of(c.caseType(), c.declarator().sizes())] for c in d.cases()]
        disc = type_of(d.switchType())
        return [{"kind": "union", "name": py_id(d.identifier()), "disc": disc, "cases": cases, "nested": _inline(d)}]
    if isinstance(d, idlast.Enum):
        items = [py_id(e.identifier()) for e in d.enumerators()]
        return [{"kind": "enum", "name": py_id(d.identifier()), "items": items}]
    if isinstance(d, idlast.Typedef):
        return [{"kind": "alias", "name": py_id(x.identifier()), "type": type_of(d.aliasType(), x.sizes())}
                for x in d.declarators()]
    if isinstance(d, idlast.Const):
        return [{"kind": "const", "name": py_id(d.identifier()), "type": type_of(d.constType())}]
    if isinstance(d, idlast.Interface):
        return [_interface(d)]
    return []  # forward declarations (the full one follows), value types, natives


def _decls(contents: list[Any]) -> list[Model]:
    return [model for d in contents for model in _decl(d)]


def _inline(d: Any) -> list[Model]:
    """Types defined inside a member (``struct A { struct B {..} b; }``): omniidl nests their classes."""
    if isinstance(d, idlast.Union):
        inner = [c.caseType().decl() for c in d.cases() if c.constrType()]
    else:
        inner = [m.memberType().decl() for m in d.members() if m.constrType()]
    return _decls(inner)


def modules(tree: Any) -> list[Model]:
    """The modules declared in the main file of ``tree``, outermost first."""
    found: list[Model] = []
    top: list[Any] = []
    for d in tree.declarations():
        if not d.mainFile():
            continue
        if isinstance(d, idlast.Module):
            _module(d, found)
        else:
            top.append(d)
    if top:
        found.insert(0, {"module": "_GlobalIDL", "decls": _decls(top)})
    return found


def _module(mod: Any, found: list[Model]) -> None:
    name = ".".join(py_id(n) for n in mod.scopedName())
    entry: Model = {"module": name, "decls": []}
    found.append(entry)
    plain = []
    for d in mod.definitions():
        if isinstance(d, idlast.Module):
            _module(d, found)
        else:
            plain.append(d)
    entry["decls"] = _decls(plain)


def run(tree: Any, args: list[str]) -> None:
    """omniidl's back-end entry point: one JSON line per IDL file."""
    sys.stdout.write(json.dumps({"file": tree.file(), "modules": modules(tree)}) + "\n")
