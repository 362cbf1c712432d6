"""The import rules of docs/architecture.md, checked against every import in the package.

The rules are read from the page's layer table, so the page and the check
cannot disagree.  Every import form counts: ``import x``, ``from x import
y``, relative imports, imports inside functions or under ``TYPE_CHECKING``,
``cimport``/``import`` lines of ``.pyx`` files, and module names given as
strings (``importlib.import_module("pyorb.x")``, ``"pyorb.x:attr"``, lazy
export tables).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pyorb"
ARCHITECTURE = ROOT / "docs" / "architecture.md"

FACADE = "pyorb"
FOUNDATION_ROW = "foundation"
EVERYTHING = "everything"


@dataclass(frozen=True)
class Layer:
    name: str
    packages: tuple[str, ...]
    may_import: frozenset[str] | None  # None: everything
    never_imports: frozenset[str]


@dataclass(frozen=True)
class Rules:
    layers: tuple[Layer, ...]
    # (importing module, imported name) pairs the page allows across the rules.
    exceptions: frozenset[tuple[str, str]]

    def package_layer(self) -> dict[str, Layer]:
        return {package: layer for layer in self.layers for package in layer.packages}

    def layer_of(self, module: str) -> Layer | None:
        """The layer of a dotted module name: the row naming its longest package prefix."""
        best: tuple[str, Layer] | None = None
        for package, layer in self.package_layer().items():
            matches = module == package or (package != FACADE and module.startswith(package + "."))
            if matches and (best is None or len(package) > len(best[0])):
                best = (package, layer)
        return best[1] if best else None


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split(" | ")]


def _table(text: str, heading: str) -> list[list[str]]:
    """The rows of the first Markdown table whose header row starts with ``heading``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {heading} |"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(_cells(line))
    return rows


def _names(cell: str) -> tuple[str, ...]:
    return tuple(re.findall(r"`([^`]+)`", cell))


def read_rules(page: Path = ARCHITECTURE) -> Rules:
    text = page.read_text()
    layers = []
    for name, packages, _job, may, never in _table(text, "layer"):
        allowed = None if may == EVERYTHING else frozenset(_names(may))
        layers.append(Layer(name, _names(packages), allowed, frozenset(_names(never))))
    exceptions = frozenset(
        (_names(module)[0], imported) for module, names, _why in _table(text, "module") for imported in _names(names)
    )
    return Rules(tuple(layers), exceptions)


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


_MODULE_STRING = re.compile(r"pyorb(\.[A-Za-z_]\w*)+(:[A-Za-z_][\w.]*)?")


def _resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute name of a relative import ``from <level dots><name> import ...`` in ``module``."""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def python_imports(path: Path, module: str) -> list[tuple[int, str]]:
    """(line, imported name) for every import in a .py file; ``from pyorb import x`` counts as ``pyorb.x``."""
    found: list[tuple[int, str]] = []
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(module, is_package, node.level, node.module) if node.level else node.module or ""
            if source == "pyorb" or source.startswith("pyorb."):
                found += [(node.lineno, f"{source}.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, source))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE_STRING.fullmatch(node.value):
            found.append((node.lineno, node.value))
    return found


_PYX_FROM = re.compile(r"^\s*from\s+([\w.]+)\s+c?import\s+\(?\s*([\w\s,]+)")
_PYX_IMPORT = re.compile(r"^\s*c?import\s+([\w.]+)")


def pyx_imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported name) for every ``import``/``cimport`` line and module-name string of a .pyx file."""
    found: list[tuple[int, str]] = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if match := _PYX_FROM.match(line):
            source = match.group(1)
            names = [n.split()[0] for n in match.group(2).split(",") if n.strip()]
            if source == "pyorb" or source.startswith("pyorb."):
                found += [(number, f"{source}.{name}") for name in names]
            else:
                found.append((number, source))
        elif match := _PYX_IMPORT.match(line):
            found.append((number, match.group(1)))
        found += [(number, m.group(0)) for m in _MODULE_STRING.finditer(line) if m.group(0).count(".")
                  and line[max(m.start() - 1, 0)] in "\"'"]
    return found


def imports(path: Path, module: str) -> list[tuple[int, str]]:
    return pyx_imports(path) if path.suffix == ".pyx" else python_imports(path, module)


def _allows(rules: Rules, source: Layer, module: str, imported: str) -> bool:
    if (module, imported) in rules.exceptions or source.may_import is None:
        return True
    target = rules.layer_of(imported.partition(":")[0])
    return target is None or target is source or target.name == FOUNDATION_ROW or any(
        rules.package_layer().get(p) is target for p in source.may_import
    )


def violations(package: Path = PACKAGE, rules: Rules | None = None) -> list[str]:
    rules = rules or read_rules()
    root = package.parent
    found = []
    for path in sorted([*package.rglob("*.py"), *package.rglob("*.pyx")]):
        module = module_name(path, root)
        where = path.relative_to(root)
        source = rules.layer_of(module)
        if source is None:
            found.append(f"{where}:1: {module} is in no layer of docs/architecture.md")
            continue
        for line, imported in imports(path, module):
            if imported.split(".")[0] in source.never_imports:
                found.append(f"{where}:{line}: {source.name} imports {imported} (no I/O here)")
            if imported.startswith("pyorb") and not _allows(rules, source, module, imported):
                target = rules.layer_of(imported.partition(":")[0])
                assert target is not None
                found.append(f"{where}:{line}: {source.name} imports {imported} ({target.name} is not below it)")
    return found


def test_every_import_follows_the_layers() -> None:
    assert violations() == []


# One file per import form, each breaking a rule; and files that keep them.
PROBES = {
    "client/plain.py": "import pyorb.server.server\n",
    "client/from_import.py": "from pyorb.server.server import Server\n",
    "client/from_package.py": "from pyorb import server\n",
    "client/relative.py": "from ..server import server\n",
    "client/in_function.py": "def f():\n    from pyorb.server import adapter\n",
    "client/type_checking.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pyorb.server.server import Server\n",
    "client/import_module.py": "import importlib\nimportlib.import_module('pyorb.server.server')\n",
    "client/by_name.py": "MAKER = 'pyorb.server.server:Server'\n",
    "client/lazy.py": "EXPORTS = {'Server': 'pyorb.server.server'}\n",
    "giop/compiled.pyx": "from pyorb.aio import protocol as _protocol\n",
    "giop/cimported.pyx": "from pyorb.marshal.orb cimport marshal\n",
    "giop/io.py": "def f():\n    import socket\n",
    "giop/io_compiled.pyx": "import asyncio\n",
    "aio/probe.py": "from pyorb import marshal\n",
    "server/strategies/probe.py": "import socket\nfrom pyorb.aio.protocol import GIOPProtocol\n",
    "server/strategies/adapter.py": "from pyorb.server.adapter import ObjectAdapter\n",
    "server/call/strategy.py": "from pyorb.server.strategies import StrategyRegistry\n",
    "giop/top.py": "from pyorb.cli import app\n",
    "unplaced/probe.py": "X = 1\n",
    "cli/fine.py": "from pyorb.server.server import Server\nimport socket\n",
    "giop/fine.py": "from . import cdr\nfrom pyorb import _accelerator\n",
    "giop/fine_compiled.pyx": "from cpython.object cimport PyObject\nfrom pyorb.giop import codec as _codec\n",
    "client/fine.py": "from .calls import route_for\nNAME = 'pyorb.giop.codec'\n",
}


def test_the_rules_catch_every_form_of_import(tmp_path: Path) -> None:
    """The checker itself, on a made-up tree: each form of import that breaks a rule is reported."""
    for name, text in PROBES.items():
        (tmp_path / "pyorb" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "pyorb" / name).write_text(text)
    found = violations(tmp_path / "pyorb")
    broken = sorted({f.split(":")[0] for f in found})
    assert broken == sorted(f"pyorb/{name}" for name in PROBES if "fine" not in name), found
    assert sum("strategies/probe.py" in f for f in found) == 2, found


def test_a_broken_rule_on_the_page_is_caught(tmp_path: Path) -> None:
    """The rules come from the page: a page that lets the client import the server passes such a file."""
    page = tmp_path / "architecture.md"
    text = ARCHITECTURE.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| client |"))
    cells = _cells(row)
    cells[3] += ", `pyorb.server`"
    page.write_text(text.replace(row, "| " + " | ".join(cells) + " |"))
    (tmp_path / "pyorb" / "client").mkdir(parents=True)
    (tmp_path / "pyorb" / "client" / "probe.py").write_text("from pyorb.server.server import Server\n")
    assert violations(tmp_path / "pyorb", read_rules(page)) == []
    assert violations(tmp_path / "pyorb") != []


def test_each_layer_imports_only_layers_above_it_in_the_table() -> None:
    """The table lists layers bottom first: a layer's imports are earlier rows, so no two layers import each other."""
    rules = read_rules()
    row = {layer.name: i for i, layer in enumerate(rules.layers)}
    owner = rules.package_layer()
    upward = [(layer.name, p) for layer in rules.layers for p in layer.may_import or ()
              if row[owner[p].name] >= row[layer.name]]
    assert upward == []


def _runtime_imports(body: list[ast.stmt], module: str, is_package: bool) -> list[str]:
    """The modules a module's body imports when it runs: not in functions, not under ``TYPE_CHECKING``."""
    found: list[str] = []
    for node in body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            found += _runtime_imports(node.orelse, module, is_package)
        elif isinstance(node, (ast.If, ast.Try)):
            blocks = [node.body, node.orelse, *(h.body for h in getattr(node, "handlers", ())),
                      getattr(node, "finalbody", [])]
            found += [name for block in blocks for name in _runtime_imports(block, module, is_package)]
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(module, is_package, node.level, node.module) if node.level else node.module or ""
            found += [source, *(f"{source}.{alias.name}" for alias in node.names)]
    return found


def import_cycles(package: Path = PACKAGE) -> list[list[str]]:
    """Groups of modules that import each other when they load (a module importing its own package aside)."""
    root = package.parent
    paths = {module_name(p, root): p for p in package.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        names = _runtime_imports(ast.parse(path.read_text()).body, module, path.name == "__init__.py")
        prefixes = {".".join(n.split(".")[:i]) for n in names for i in range(1, n.count(".") + 2)}
        graph[module] = {m for m in prefixes & paths.keys() if m != module and not module.startswith(m + ".")}
    reach = {m: set(graph[m]) for m in graph}
    changed = True
    while changed:  # the transitive closure: the package is small enough
        changed = False
        for m in reach:
            more = set().union(*(reach[n] for n in reach[m])) - reach[m]
            if more:
                reach[m] |= more
                changed = True
    cycles = {tuple(sorted(n for n in reach[m] if m in reach[n])) for m in reach if m in reach[m]}
    return sorted(list(c) for c in cycles)


def test_no_two_modules_import_each_other_when_they_load() -> None:
    assert import_cycles() == []


def test_an_import_cycle_is_caught(tmp_path: Path) -> None:
    files = {"a.py": "from pyorb import b\n", "b.py": "import pyorb.c\n", "c.py": "from .a import x\n",
             "d.py": "def f():\n    from pyorb import a\n", "e.py": "from typing import TYPE_CHECKING\n"
             "if TYPE_CHECKING:\n    from pyorb import a\n", "__init__.py": ""}
    for name, text in files.items():
        (tmp_path / "pyorb").mkdir(exist_ok=True)
        (tmp_path / "pyorb" / name).write_text(text)
    assert import_cycles(tmp_path / "pyorb") == [["pyorb.a", "pyorb.b", "pyorb.c"]]


def test_every_named_package_exists() -> None:
    rules = read_rules()
    named = [p for layer in rules.layers for p in (*layer.packages, *(layer.may_import or ()))]
    missing = [p for p in named if not (ROOT / p.replace(".", "/")).is_dir()
               and not any((ROOT / (p.replace(".", "/") + suffix)).is_file() for suffix in (".py", ".pyx"))
               and p != FACADE]
    assert missing == []


def test_the_tree_on_the_page_names_every_module() -> None:
    text = ARCHITECTURE.read_text()
    tree = text[text.index("## The package, file by file"):]
    tree = tree[tree.index("```text"):tree.index("```", tree.index("```text") + 3)]
    named: set[str] = set()
    path: list[str] = []
    for line in tree.splitlines()[1:]:
        depth = (len(line) - len(line.lstrip())) // 4
        name = line.split()[0]
        path[depth:] = [name]
        named.add("".join(path))
    files = {p.relative_to(ROOT).as_posix().removesuffix("__init__.py")
             for p in [*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.pyx")]}
    assert sorted(files - named) == [] and sorted(named - files) == []


@pytest.mark.parametrize(("a", "b"), [("pyorb.server", "pyorb.client"), ("pyorb.client", "pyorb.server")])
def test_server_and_client_never_import_each_other(a: str, b: str) -> None:
    owner = read_rules().package_layer()
    assert b not in (owner[a].may_import or {b})


def twins_outside_the_registry(package: Path = PACKAGE) -> list[str]:
    """Each place a module of ``package`` names a compiled module of C twins other than in a
    declaration to ``_accelerator.twin``: the one way a twin takes its original's place."""
    from pyorb._accelerator import NATIVE

    def native(name: str) -> bool:
        return any(name == n or name.startswith(n + ".") for n in NATIVE)

    found = []
    root = package.parent
    for path in sorted(package.rglob("*.py")):
        module = module_name(path, root)
        if module == "pyorb._accelerator":
            continue
        tree = ast.parse(path.read_text(), str(path))
        declared = {id(call.args[2]) for call in ast.walk(tree) if isinstance(call, ast.Call) and len(call.args) > 2
                    and getattr(call.func, "attr", getattr(call.func, "id", None)) == "twin"}
        for node in ast.walk(tree):
            named: list[str] = []
            if isinstance(node, ast.Import):
                named = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                source = _resolve(module, path.name == "__init__.py", node.level, node.module) if node.level \
                    else node.module or ""
                named = [source, *(f"{source}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in declared:
                named = [node.value.partition(":")[0]]
            found += [f"{path.relative_to(root)}:{node.lineno}: names {name} outside a twin declaration"
                      for name in named if native(name)]
    return found


def test_every_twin_takes_its_place_through_the_registry() -> None:
    assert twins_outside_the_registry() == []


def test_a_twin_put_in_place_another_way_is_caught(tmp_path: Path) -> None:
    probes = {
        "client/rebinds.py": "class W: ...\nfrom pyorb.client._cwriter import RequestWriter as W\n",
        "aio/by_module.py": "from pyorb.aio import _csend\n_send_now = _csend._send_now\n",
        "marshal/by_name.py": "import importlib\nf = importlib.import_module('pyorb.marshal.layout._cwalk')._zero_flat\n",
        "aio/fine.py": "from pyorb import _accelerator\n_accelerator.twin(__name__, '_send_now', 'pyorb.aio._csend')\n",
    }
    for name, text in probes.items():
        (tmp_path / "pyorb" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "pyorb" / name).write_text(text)
    found = twins_outside_the_registry(tmp_path / "pyorb")
    assert sorted({f.split(":")[0] for f in found}) == sorted(f"pyorb/{n}" for n in probes if "fine" not in n), found
