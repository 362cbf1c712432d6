"""Parameter names and directions of IDL operations, from omniidl's front end.

omniidl's Python stubs keep only the types of an operation's parameters; the
CLI wants their names and directions to print signatures and label results.
This module is both an omniidl back end (``omniidl -bpyorb.cli.idlsig``,
whose ``run`` prints JSON) and the function that runs it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

DIRECTIONS = ("in", "out", "inout")


@dataclass(frozen=True)
class Param:
    """One parameter: ``direction`` is "in", "out" or "inout"."""

    direction: str
    name: str


@dataclass(frozen=True)
class OpSignature:
    """What the stubs do not say about an operation."""

    name: str
    params: tuple[Param, ...]
    oneway: bool

    @property
    def in_names(self) -> list[str]:
        return [p.name for p in self.params if p.direction != "out"]

    @property
    def out_names(self) -> list[str]:
        return [p.name for p in self.params if p.direction != "in"]


Signatures = dict[str, dict[str, OpSignature]]
"""Interface repository id -> operation name -> signature."""

_cache: dict[tuple[Path, tuple[str, ...]], Signatures] = {}


def signatures(path: str | os.PathLike[str], include_dirs: Iterable[str | os.PathLike[str]] = ()) -> Signatures:
    """The signatures of every interface ``path`` defines or includes.

    Runs omniidl with this module as its back end (once per file).  Raises
    ImportError with omniidl's message if the IDL does not compile.
    """
    resolved = Path(path).resolve()
    dirs = tuple(str(d) for d in include_dirs) or (str(resolved.parent),)
    key = (resolved, dirs)
    if key not in _cache:
        _cache[key] = _parse(_run_omniidl(resolved, dirs))
    return _cache[key]


def _run_omniidl(path: Path, include_dirs: tuple[str, ...]) -> str:
    omniidl = shutil.which("omniidl")
    if omniidl is None:
        raise FileNotFoundError("omniidl not found on PATH (it comes with the jeteve-omniorb wheel)")
    cmd = [omniidl, f"-b{__name__}", *(f"-I{d}" for d in include_dirs), str(path)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=_child_env())
    if done.returncode != 0:
        raise ImportError(f"omniidl failed on {path}: {done.stderr.strip()}")
    return done.stdout


def _child_env() -> dict[str, str]:
    # omniidl must import this module, wherever pyorb was imported from.
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


def _parse(text: str) -> Signatures:
    raw: dict[str, dict[str, Any]] = json.loads(text)
    return {
        repo_id: {
            name: OpSignature(name, tuple(Param(d, n) for d, n in op["params"]), op["oneway"])
            for name, op in ops.items()
        }
        for repo_id, ops in raw.items()
    }


# -- the omniidl back end: runs inside omniidl's process -------------------------


def run(tree: Any, args: list[str]) -> None:
    """omniidl's entry point: print every interface's operations as JSON."""
    found: dict[str, dict[str, Any]] = {}
    _walk(tree.declarations(), found)
    json.dump(found, sys.stdout)


def _walk(decls: Iterable[Any], found: dict[str, dict[str, Any]]) -> None:
    from omniidl import idlast  # type: ignore[import-untyped]  # omniidl's front end, run by omniidl

    for decl in decls:
        if isinstance(decl, idlast.Module):
            _walk(decl.definitions(), found)
        elif isinstance(decl, idlast.Interface):
            found[decl.repoId()] = _callables(decl, idlast)


def _callables(iface: Any, idlast: Any) -> dict[str, Any]:
    ops: dict[str, Any] = {}
    for c in iface.callables():
        if isinstance(c, idlast.Operation):
            params = [[DIRECTIONS[p.direction()], p.identifier()] for p in c.parameters()]
            ops[c.identifier()] = {"params": params, "oneway": bool(c.oneway())}
        elif isinstance(c, idlast.Attribute):
            for name in c.identifiers():
                ops["_get_" + name] = {"params": [], "oneway": False}
                if not c.readonly():
                    ops["_set_" + name] = {"params": [["in", "value"]], "oneway": False}
    return ops
