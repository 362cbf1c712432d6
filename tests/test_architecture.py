"""The import rules of docs/architecture.md, checked against every import in the package.

Function-level imports count too.  A layer may import only what the
architecture page allows it; the protocol core and marshaling do no I/O;
server and client never import each other; strategies never see sockets.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pyorb"
ARCHITECTURE = ROOT / "docs" / "architecture.md"

# Layer -> the pyorb layers it may import (besides itself).  Anything not
# listed is the top (applications and tools), which may import everything.
ALLOWED: dict[str, set[str]] = {
    "pyorb.giop": set(),
    "pyorb.marshal.layout": set(),
    "pyorb.marshal": {"pyorb.giop", "pyorb.marshal.layout"},
    "pyorb.config": {"pyorb.giop", "pyorb.marshal.layout"},
    "pyorb.idl.compiler": {"pyorb.marshal", "pyorb.marshal.layout", "pyorb.giop"},
    "pyorb.idl.model": set(),
    "pyorb.tls": set(),
    "pyorb.request_context": set(),
    "pyorb.interceptors": {"pyorb.giop", "pyorb.tls"},
    "pyorb.aio": {"pyorb.giop", "pyorb.config"},
    "pyorb.client": {"pyorb.aio", "pyorb.giop", "pyorb.marshal", "pyorb.marshal.layout", "pyorb.config",
                     "pyorb.tls", "pyorb.interceptors", "pyorb.request_context"},
    "pyorb.model": set(),
    "pyorb.server.strategies": {"pyorb.server", "pyorb.config", "pyorb.model"},
    "pyorb.server": {"pyorb.aio", "pyorb.giop", "pyorb.marshal", "pyorb.marshal.layout", "pyorb.config",
                     "pyorb.tls", "pyorb.interceptors", "pyorb.request_context",
                     "pyorb.server.strategies"},
}
# Standard-library modules a layer must not import: the core and the models
# do no I/O, strategies know nothing of sockets.
NO_IO = {"socket", "ssl", "selectors", "asyncio", "subprocess"}
FORBIDDEN_STDLIB: dict[str, set[str]] = {
    "pyorb.giop": NO_IO,
    "pyorb.marshal.layout": NO_IO,
    "pyorb.marshal": NO_IO,
    "pyorb.model": NO_IO,
    "pyorb.server.strategies": {"socket", "ssl", "selectors"},
}


def layer(module: str) -> str:
    """The layer of a dotted module name: its longest prefix in ALLOWED, else "top"."""
    best = ""
    for name in ALLOWED:
        if (module == name or module.startswith(name + ".")) and len(name) > len(best):
            best = name
    return best or "top"


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported module) for every import in ``path``; ``from pyorb import x`` counts as ``pyorb.x``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module == "pyorb" or node.module.startswith("pyorb."):
                found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, node.module))
    return found


# Standard-library helpers of the package itself that any layer may use.
FOUNDATION = ("pyorb._lazy", "pyorb._accelerator")


def target_layer(imported: str) -> str | None:
    """The pyorb layer an import reaches (None for a module outside pyorb or in the foundation)."""
    if imported != "pyorb" and not imported.startswith("pyorb."):
        return None
    if any(imported == f or imported.startswith(f + ".") for f in FOUNDATION):
        return None
    # "from pyorb.marshal import Operation" names pyorb.marshal.Operation: the longest module prefix decides.
    return layer(imported)


def violations(package: Path = PACKAGE) -> list[str]:
    root = package.parent
    found = []
    for path in sorted(package.rglob("*.py")):
        source = layer(module_name(path, root))
        if source == "top":
            continue
        allowed = ALLOWED[source] | {source}
        for line, imported in imports(path):
            where = f"{path.relative_to(root)}:{line}"
            top_level = imported.split(".")[0]
            if top_level in FORBIDDEN_STDLIB.get(source, set()):
                found.append(f"{where}: {source} imports {imported} (no I/O here)")
            target = target_layer(imported)
            if target is not None and target not in allowed:
                found.append(f"{where}: {source} imports {imported} ({target} is not below it)")
    return found


def test_every_import_follows_the_layers() -> None:
    assert violations() == []


def test_the_rules_catch_violations(tmp_path: Path) -> None:
    """The checker itself, on a made-up tree: each kind of violation is reported."""
    files = {
        "client/probe.py": "from pyorb.server.server import Server\n",
        "giop/probe.py": "def f():\n    import socket\n",
        "aio/probe.py": "from pyorb import marshal\n",
        "server/strategies/probe.py": "import socket\nfrom pyorb.aio.protocol import GIOPProtocol\n",
        "cli/fine.py": "from pyorb.server.server import Server\nimport socket\n",
    }
    for name, text in files.items():
        (tmp_path / "pyorb" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "pyorb" / name).write_text(text)
    found = violations(tmp_path / "pyorb")
    assert [f.split(":")[0] for f in found] == [
        "pyorb/aio/probe.py", "pyorb/client/probe.py", "pyorb/giop/probe.py",
        "pyorb/server/strategies/probe.py", "pyorb/server/strategies/probe.py",
    ], found


def test_the_page_names_every_part_of_the_package() -> None:
    page = ARCHITECTURE.read_text()
    parts = {p.stem for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__", "_lazy")}
    parts |= {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    missing = sorted(p for p in parts if f"pyorb.{p}" not in page)
    assert missing == [], f"docs/architecture.md does not place: {missing}"
    for name in ALLOWED:
        assert f"`{name}`" in page or f"`{name.rsplit('.', 1)[-1]}`" in page, name


def test_server_and_client_never_import_each_other() -> None:
    assert "pyorb.client" not in ALLOWED["pyorb.server"] and "pyorb.server" not in ALLOWED["pyorb.client"]
