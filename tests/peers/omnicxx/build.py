#!/usr/bin/env python3
"""Build the omniORB 4.2 C++ peers: the SSL echo peers (echo_server,
echo_client) and the bidirectional GIOP peer (bidir_peer).

The standard library and the path of pyorb's bench IDL only.  ``missing()``
says why the toolchain is unusable (for a test skip), ``build(out_dir)``
compiles the echo programs into ``out_dir`` and returns their paths,
``build_bidir(out_dir)`` the bidirectional peer (no SSL needed:
``missing(ssl=False)``).  A build whose outputs are newer than every input
is reused.

    python tests/peers/omnicxx/build.py OUT_DIR
"""
from __future__ import annotations

import glob
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

from pyorb.idl import BENCH_IDL

HERE = pathlib.Path(__file__).resolve().parent
IDL = BENCH_IDL
OMNIIDL = pathlib.Path("/usr/bin/omniidl")  # not the venv's omniORBpy one
INCLUDE = pathlib.Path("/usr/include/omniORB4")
SOURCES = {"server": HERE / "echo_server.cc", "client": HERE / "echo_client.cc"}
BIDIR_IDL = HERE.parents[2] / "idl" / "bidir.idl"
BIDIR_SOURCE = HERE / "bidir_peer.cc"
CXXFLAGS = ["-O2", "-std=gnu++17", "-pthread", "-Wall", "-Wno-unused"]
LIBS = ["-lomnisslTP4", "-lomniORB4", "-lomnithread", "-lssl", "-lcrypto",
        "-lpthread"]
PLAIN_LIBS = ["-lomniDynamic4", "-lomniORB4", "-lomnithread", "-lpthread"]  # Dynamic: Any, create_policy
LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
            "/usr/lib64", "/usr/lib", "/usr/local/lib")


def _cxx() -> str | None:
    return shutil.which(os.environ.get("CXX", "g++"))


def _have_lib(name: str) -> bool:
    """A linkable lib<name>.so in a usual directory (or any multiarch one)."""
    candidates = [f"{d}/lib{name}.so" for d in LIB_DIRS]
    candidates += glob.glob(f"/usr/lib/*/lib{name}.so")
    return any(os.path.exists(c) for c in candidates)


def missing(ssl: bool = True) -> str | None:
    """Why the peers cannot be built here, or None if they can (``ssl``: the
    echo peers, which need omniORB's SSL transport and OpenSSL)."""
    if _cxx() is None:
        return "no C++ compiler (g++) on PATH"
    if not OMNIIDL.is_file():
        return f"{OMNIIDL} (omniORB's C++ IDL compiler, Debian 'omniidl') is absent"
    if not (INCLUDE / "CORBA.h").is_file():
        return f"omniORB C++ headers are absent ({INCLUDE}/CORBA.h; 'libomniorb4-dev')"
    if ssl and not (INCLUDE / "sslContext.h").is_file():
        return f"{INCLUDE}/sslContext.h is absent (omniORB built without SSL)"
    if ssl and not pathlib.Path("/usr/include/openssl/ssl.h").is_file():
        return "OpenSSL headers are absent (/usr/include/openssl/ssl.h; 'libssl-dev')"
    libs = ("omniORB4", "omnithread", "omnisslTP4", "ssl", "crypto") if ssl else ("omniORB4", "omniDynamic4", "omnithread")
    for lib in libs:
        if not _have_lib(lib):
            return f"lib{lib}.so is absent"
    for idl in (IDL, BIDIR_IDL) if ssl else (BIDIR_IDL,):
        if not idl.is_file():
            return f"{idl} is absent"
    return None


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _run_all(commands: list[list[str]], cwd: pathlib.Path, what: str) -> None:
    """Run the commands in parallel; RuntimeError with stderr on a failure."""
    procs = [(cmd, subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True))
             for cmd in commands]
    failures = []
    for cmd, proc in procs:
        out, err = proc.communicate()
        if proc.returncode != 0:
            failures.append(f"$ {' '.join(cmd)}\n(exit {proc.returncode})\n"
                            f"{_tail(err or out)}")
    if failures:
        raise RuntimeError(f"{what} failed:\n" + "\n\n".join(failures))


def _up_to_date(outputs: list[pathlib.Path], inputs: list[pathlib.Path]) -> bool:
    try:
        oldest = min(p.stat().st_mtime for p in outputs)
    except FileNotFoundError:
        return False
    return all(p.stat().st_mtime <= oldest for p in inputs)


def build(out_dir: pathlib.Path) -> dict[str, pathlib.Path]:
    """Compile echo_server and echo_client into out_dir; return their paths."""
    reason = missing()
    if reason:
        raise RuntimeError(f"cannot build the omniORB C++ peers: {reason}")
    programs = {name: (f"echo_{name}", src) for name, src in SOURCES.items()}
    return _build(pathlib.Path(out_dir), IDL, programs, LIBS)


def build_bidir(out_dir: pathlib.Path) -> pathlib.Path:
    """Compile bidir_peer into out_dir; return its path."""
    reason = missing(ssl=False)
    if reason:
        raise RuntimeError(f"cannot build the omniORB C++ bidirectional peer: {reason}")
    return _build(pathlib.Path(out_dir), BIDIR_IDL, {"peer": ("bidir_peer", BIDIR_SOURCE)}, PLAIN_LIBS)["peer"]


def _build(out_dir: pathlib.Path, idl: pathlib.Path, programs: dict[str, tuple[str, pathlib.Path]],
           libs: list[str]) -> dict[str, pathlib.Path]:
    """Compile ``programs`` (name: (executable, source)) with ``idl``'s stubs."""
    out_dir = out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    exes = {name: out_dir / exe for name, (exe, _) in programs.items()}
    inputs = [idl, pathlib.Path(__file__).resolve(), HERE / "json_text.h", *(src for _, src in programs.values())]
    if _up_to_date(list(exes.values()), inputs):
        return exes

    # Build in a private directory and move the programs into place, so
    # that concurrent builds into one out_dir cannot see half-written files.
    work = pathlib.Path(tempfile.mkdtemp(prefix=".build-", dir=out_dir))
    try:
        _run_all([[str(OMNIIDL), "-bcxx", "-C", str(work), str(idl)]],
                 work, "omniidl")
        stub = work / f"{idl.stem}SK.cc"
        cxx = _cxx()
        assert cxx is not None
        common = [cxx, *CXXFLAGS, "-I", str(work), "-c"]
        objects = {"stub": work / f"{idl.stem}SK.o",
                   **{name: work / f"{exe}.o" for name, (exe, _) in programs.items()}}
        compiles = [[*common, str(stub), "-o", str(objects["stub"])]]
        compiles += [[*common, str(src), "-o", str(objects[name])]
                     for name, (_, src) in programs.items()]
        _run_all(compiles, work, "compiling the omniORB C++ peers")
        links = [[cxx, "-pthread", str(objects[name]), str(objects["stub"]),
                  "-o", str(work / exe.name), *libs]
                 for name, exe in exes.items()]
        _run_all(links, work, "linking the omniORB C++ peers")
        for exe in exes.values():
            os.replace(work / exe.name, exe)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return exes


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1].startswith("-"):
        print(f"usage: {argv[0]} OUT_DIR", file=sys.stderr)
        return 2
    reason = missing()
    if reason:
        print(f"cannot build: {reason}", file=sys.stderr)
        return 1
    try:
        paths = build(pathlib.Path(argv[1]))
        paths["bidir_peer"] = build_bidir(pathlib.Path(argv[1]))
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        return 1
    for name, path in paths.items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
