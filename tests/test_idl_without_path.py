"""omniidl runs through the current interpreter, not PATH.

A virtualenv used without activation (its python run by path from systemd, a
container or cron) has no bin/ on PATH.  These run pyorb's own interpreter
with a PATH that holds only a shell, so that no `omniidl` or `omnicpp` is
found there (not even Debian's C++ omniidl in /usr/bin, which the TLS
interoperability tests install).
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from pyorb.idl import BENCH_IDL

pytestmark = pytest.mark.integration  # opens sockets or starts processes

ROOT = Path(__file__).resolve().parents[1]
_BARE = Path(tempfile.mkdtemp(prefix="pyorb-bare-path-"))
(_BARE / "sh").symlink_to("/bin/sh")
atexit.register(shutil.rmtree, _BARE, True)
BARE_PATH = str(_BARE)


def run_bare(code: str, *args: str, cwd: Path = ROOT, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": BARE_PATH}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=timeout, check=False)


def test_omniidl_is_not_on_the_bare_path() -> None:
    # Otherwise the tests below would prove nothing.
    assert shutil.which("omniidl", path=BARE_PATH) is None


def test_load_idl_and_a_call_work_without_the_virtualenv_on_path() -> None:
    code = (
        "import asyncio, pyorb\n"
        "from pyorb.idl import bench_idl\n"
        "idl = bench_idl()\n"
        "class Echo(idl.Bench__POA.Echo):\n"
        "    def ping(self, stamp): return stamp + 1\n"
        "    def notify(self, stamp): pass\n"
        "async def main():\n"
        "    async with pyorb.Server(port=0) as server, pyorb.Client() as client:\n"
        "        echo = client.resolve(server.ior(server.activate(Echo(), 'e')), idl.Bench.Echo)\n"
        "        print(await echo.ping(41))\n"
        "asyncio.run(main())\n"
    )
    done = run_bare(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "42"


def test_compile_idl_works_without_the_virtualenv_on_path(tmp_path: Path) -> None:
    done = run_bare("import sys, pyorb, pyorb.idl; pyorb.compile_idl(pyorb.idl.BENCH_IDL, sys.argv[1])", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "Bench" / "__init__.py").is_file()


def test_bad_idl_is_one_clear_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.idl"
    bad.write_text("module M { interface I { void op(in nosuchtype x); }; };\n")
    done = run_bare(
        "import sys, pyorb\n"
        "try:\n"
        "    pyorb.load_idl(sys.argv[1])\n"
        "except ImportError as exc:\n"
        "    print(type(exc).__name__, exc)\n", str(bad))
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip()
    assert "\n" not in line
    assert line.startswith("IDLError omniidl failed on") and "bad.idl" in line and "nosuchtype" in line, line


def test_cli_compile_of_bad_idl_says_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.idl"
    bad.write_text("module M { struct S { long x }; };\n")
    done = run_bare("import sys; from pyorb.cli import main; sys.exit(main(sys.argv[1:]))",
                    "compile", str(bad), "--output", str(tmp_path / "out"))
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "bad.idl" in errors[0], done.stderr


@pytest.mark.parametrize("peer", ["omnipeer"])
def test_omniorbpy_peer_imports_idl_without_path(peer: str, tmp_path: Path) -> None:
    # The pytest plugin's omni_server runs this peer; it must start from a bare PATH too.
    env = {**os.environ, "PATH": BARE_PATH}
    with subprocess.Popen(
        [sys.executable, "-m", "pyorb.testing.omnipeer", "serve", "--idl", str(BENCH_IDL),
         "--servant", f"{ROOT / 'tests' / 'omni_naming_peer.py'}:Echo"],
        cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) as proc:
        assert proc.stdout is not None and proc.stdin is not None
        first = proc.stdout.readline()
        try:
            _, errors = proc.communicate("", timeout=20)  # the peer stops at stdin EOF
        except subprocess.TimeoutExpired:
            proc.kill()
            _, errors = proc.communicate()
    assert first.startswith("IOR:"), errors


def test_demo_without_the_virtualenv_on_path() -> None:
    env = {**os.environ, "PATH": BARE_PATH}
    done = subprocess.run([sys.executable, "-m", "pyorb.demo", "--clients", "5", "--seconds", "0.3",
                           "--delay", "0.02"], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "In words:" in done.stdout
