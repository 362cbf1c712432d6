"""Where code lives in the repository: one home per tool, nothing found by path tricks.

Tools run as modules of a package (``python -m benchmarks.bench_echo`` from
the repository root), so no file edits ``sys.path`` to find another; only
the test configuration (pyproject.toml's ``pythonpath``, pytest's
``MonkeyPatch.syspath_prepend``) may.  What ``pyorb`` runs ships inside the
package: nothing under pyorb/ names a path outside it.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[1]
PATH_CHANGES = {"insert", "append", "extend", "remove", "pop", "clear", "__setitem__", "__iadd__"}


def tracked_python_files(under: str = ".") -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z", "--", f"{under}/*.py" if under != "." else "*.py"],
                            cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / name for name in listed.split("\0") if name and (ROOT / name).is_file()]


def is_sys_path(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name)
            and node.value.id == "sys")


def sys_path_edits(tree: ast.AST) -> Iterator[int]:
    """Lines that change sys.path: assignments to it or its items, its mutating methods, site.addsitedir."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if is_sys_path(target) or (isinstance(target, ast.Subscript) and is_sys_path(target.value)):
                    yield node.lineno
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in PATH_CHANGES and is_sys_path(node.func.value):
                yield node.lineno
            if node.func.attr == "addsitedir":
                yield node.lineno


def test_no_file_edits_sys_path() -> None:
    found = [f"{path.relative_to(ROOT)}:{line}" for path in tracked_python_files()
             for line in sys_path_edits(ast.parse(path.read_text(), str(path)))]
    assert not found, f"sys.path edited (run the tool as a module from the repository root instead): {found}"


def test_the_check_sees_each_way_of_editing_sys_path() -> None:
    code = ("import sys, site\nsys.path.insert(0, 'x')\nsys.path[:0] = ['x']\nsys.path = []\n"
            "sys.path += ['x']\nsys.path.append('x')\nsite.addsitedir('x')\nprint(sys.path)\n")
    assert sorted(sys_path_edits(ast.parse(code))) == [2, 3, 4, 5, 6, 7]


# -- nothing under pyorb/ reaches outside it -------------------------------------------


def top_level_folders() -> set[str]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return {name.split("/", 1)[0] for name in listed.split("\0") if "/" in name} - {"pyorb"}


def docstring_nodes(tree: ast.AST) -> set[int]:
    nodes: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                nodes.add(id(first.value))
    return nodes


def mentions_file(node: ast.AST) -> str | None:
    """``__file__`` (this module) or ``pyorb.__file__`` in ``node``, if either is there."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id == "__file__":
            return "self"
        if (isinstance(sub, ast.Attribute) and sub.attr == "__file__" and isinstance(sub.value, ast.Name)
                and sub.value.id == "pyorb"):
            return "pyorb"
    return None


def escapes(tree: ast.AST, depth: int, folders: set[str]) -> Iterator[tuple[int, str]]:
    """Where a module ``depth`` folders below pyorb/ names something outside pyorb/.

    ``Path(__file__).parents[k]`` is outside for k >= depth (``parents[depth - 1]``
    is pyorb/ itself); so is a ``.parent`` chain longer than ``depth``; and a
    string (not a docstring) that is, or starts with, another top-level folder.
    """
    docs = docstring_nodes(tree)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "parents"
                and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int)):
            base = mentions_file(node.value)
            if base is not None and node.slice.value >= (1 if base == "pyorb" else depth):
                yield node.lineno, f"parents[{node.slice.value}]"
        elif isinstance(node, ast.Attribute) and node.attr == "parent":
            chain, inner = 0, node
            while isinstance(inner, ast.Attribute) and inner.attr == "parent":
                chain, inner = chain + 1, inner.value
            base = mentions_file(inner)
            if base is not None and chain > (1 if base == "pyorb" else depth):
                yield node.lineno, ".parent" * chain
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            head = node.value.split("/", 1)[0]
            if head in folders and (node.value == head or "/" in node.value):
                yield node.lineno, repr(node.value)


def test_nothing_under_pyorb_names_a_path_outside_the_package() -> None:
    folders = top_level_folders()
    found = []
    for path in tracked_python_files("pyorb"):
        depth = len(path.relative_to(ROOT / "pyorb").parts)
        found += [f"{path.relative_to(ROOT)}:{line} {what}"
                  for line, what in escapes(ast.parse(path.read_text(), str(path)), depth, folders)]
    assert not found, f"pyorb/ reaches outside the package (ship it inside, find it by module): {found}"


def test_the_check_sees_each_way_out_of_the_package() -> None:
    code = ('"""See loadtests/x.py."""\nfrom pathlib import Path\nimport pyorb\n'
            'A = Path(__file__).resolve().parents[1] / "data"\n'
            'B = Path(__file__).resolve().parents[2] / "loadtests"\n'
            'C = Path(pyorb.__file__).resolve().parents[1]\n'
            'D = Path(__file__).parent.parent.parent\n'
            'E = "loadtests/locustfiles/sink.py"\n'
            'F = Path(__file__).parent / "data"\n')
    found = [line for line, _ in escapes(ast.parse(code), 2, {"loadtests"})]
    assert sorted(found) == [5, 5, 6, 7, 8]  # line 5: parents[2] and "loadtests"


# -- each IDL file once: what the package ships is the only copy -----------------------


def tracked_files(pattern: str) -> list[str]:
    listed = subprocess.run(["git", "ls-files", "-z", "--", pattern], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout
    return [name for name in listed.split("\0") if name and (ROOT / name).is_file()]


def second_copies(files: dict[str, bytes]) -> list[tuple[str, str]]:
    """Pairs of files that are one IDL file twice: the same file name, or the same bytes."""
    seen: dict[object, str] = {}
    pairs = []
    for name in sorted(files):
        for key in (("name", Path(name).name), ("bytes", files[name])):
            if key in seen and (seen[key], name) not in pairs:
                pairs.append((seen[key], name))
            seen.setdefault(key, name)
    return pairs


def test_each_idl_file_is_in_the_repository_once() -> None:
    files = {name: (ROOT / name).read_bytes() for name in tracked_files("*.idl")}
    assert not second_copies(files), (
        f"IDL kept twice can drift: {second_copies(files)}; keep what pyorb ships in pyorb/data/ only "
        "(pyorb.idl.BENCH_IDL, pyorb.idl.bench_idl()) and the rest in idl/")


def test_the_check_sees_a_second_copy_by_name_or_by_content() -> None:
    files = {"idl/a.idl": b"module A {};", "pyorb/data/a.idl": b"module A { };", "idl/b.idl": b"module B {};",
             "idl/c.idl": b"module B {};", "idl/d.idl": b"module D {};", "pyorb/data/d.idl": b"module D {};"}
    assert second_copies(files) == [("idl/b.idl", "idl/c.idl"), ("idl/a.idl", "pyorb/data/a.idl"),
                                    ("idl/d.idl", "pyorb/data/d.idl")]


# -- pyorb serve imports the user's module without touching sys.path ------------------


def test_serve_imports_a_module_of_the_current_directory_and_leaves_sys_path_alone(tmp_path: Path,
                                                                                   monkeypatch: pytest.MonkeyPatch
                                                                                   ) -> None:
    from pyorb.cli.serve import servant_class

    package = tmp_path / "layout_probe_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "servants.py").write_text("class Probe:\n    pass\n")
    monkeypatch.chdir(tmp_path)
    before = list(sys.path)
    try:
        cls = servant_class("layout_probe_pkg.servants:Probe")
    finally:
        for name in [m for m in sys.modules if m.split(".")[0] == "layout_probe_pkg"]:
            del sys.modules[name]
    assert cls.__name__ == "Probe" and cls.__module__ == "layout_probe_pkg.servants"
    assert sys.path == before and os.fspath(tmp_path) not in sys.path


# -- no runtime import circle through the tools --------------------------------------

TOOLS = ("pyorb.cli", "pyorb.loadtest", "pyorb.servers", "pyorb.testing")


def module_names() -> dict[str, Path]:
    names = {}
    for path in tracked_python_files("pyorb"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def runtime_imports(name: str, path: Path, names: dict[str, Path]) -> set[str]:
    """The pyorb modules ``name`` imports when it runs (function-level imports too, not TYPE_CHECKING ones)."""
    tree = ast.parse(path.read_text(), str(path))
    typing_only = {id(sub) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and "TYPE_CHECKING" in ast.unparse(node.test) for sub in ast.walk(node)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only or not isinstance(node, (ast.Import, ast.ImportFrom)) or \
                (isinstance(node, ast.ImportFrom) and node.level):
            continue
        targets = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [f"{node.module}.{a.name}" for a in node.names] + [str(node.module)]
        for target in targets:
            while target and target not in names:
                target = target.rpartition(".")[0]
            if target and not (name + ".").startswith(target + ".") and not target.startswith(name + "."):
                found.add(target)
    return found


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = stack[stack.index(v):]
            del stack[stack.index(v):]
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_runtime_import_circle_runs_through_the_tools() -> None:
    names = module_names()
    graph = {name: runtime_imports(name, path, names) for name, path in names.items()}
    through_tools = [c for c in circles(graph) if any(m.startswith(TOOLS) for m in c)]
    assert not through_tools, f"import circles (a shared piece belongs in a module both import): {through_tools}"


def test_the_circle_finder_finds_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.integration  # runs pytest in a process
def test_the_unit_run_collects_no_interop_test() -> None:
    """``-m "not integration"`` leaves out every interop test, however it got its marker."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-m", "not integration", "--collect-only", "-q",
                           "-p", "no:cacheprovider", "tests/interop"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "no tests collected" in done.stdout and "deselected" in done.stdout, done.stdout[-2000:]
