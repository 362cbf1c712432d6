"""The pytest plugin itself: registration, cheap import, process handling, errors.

What the fixtures are for is shown by tests/user_suite/; here are the
edges: a user's suite in a fresh directory that gets the fixtures from the
installed entry point alone, leaves no process behind, and clear errors
from servers and peers that misbehave.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import pyorb
from pyorb.idl import BENCH_IDL
from pyorb.testing import kit as testkit
from pyorb.testing.plugin import PeerProcessError, ServerProcess, SyncClient

pytestmark = pytest.mark.integration  # opens sockets or starts processes

ROOT = Path(__file__).resolve().parents[1]
Bench = pyorb.load_idl(BENCH_IDL).Bench


def alive(pid: int) -> bool:
    """True if ``pid`` is a live (not zombie) process."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_registered_as_a_pytest11_entry_point() -> None:
    found = {e.name: e.value for e in importlib.metadata.entry_points(group="pytest11")}
    assert found.get("pyorb") == "pyorb.testing.plugin"


def test_importing_the_plugin_loads_neither_omniorb_nor_pyorbs_runtime() -> None:
    code = (
        "import sys, pyorb.testing.plugin\n"
        "heavy = ('omniORB', '_omnipy', 'CORBA', 'locust', 'pyorb.client', 'pyorb.server', 'pyorb.marshal')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


USER_TESTS = '''
import asyncio, json, os
from pathlib import Path
import pytest
import pyorb
from pyorb import naming

IDL = pyorb.load_idl({idl!r})
PIDS = Path({pids!r})

class Echo(IDL.Bench__POA.Echo):
    def ping(self, stamp):
        return stamp
    def notify(self, stamp):
        pass

def test_sync(pyorb_server, pyorb_sync_client, omni_server, omni_names):
    served = pyorb_server(Echo)
    assert pyorb_sync_client.resolve(served.ior, IDL.Bench.Echo).ping(7) == 7
    peer = omni_server({idl!r}, {peer!r})
    assert pyorb_sync_client.resolve(peer.corbaloc, IDL.Bench.Echo).ping(7) == 8
    PIDS.write_text(json.dumps([peer.pid, omni_names.pid]))

@pytest.mark.asyncio
async def test_async(pyorb_async_server, pyorb_client, omni_names):
    served = await pyorb_async_server(Echo())
    root = naming.root_context(pyorb_client, omni_names.corbaloc)
    await root.bind("echo", pyorb_client.resolve(served.ior))
    assert await (await root.resolve("echo", IDL.Bench.Echo)).ping(3) == 3
'''


def test_a_fresh_suite_gets_the_fixtures_and_leaves_no_process(tmp_path: Path) -> None:
    pids = tmp_path / "pids.json"
    peer = f"{ROOT / 'tests' / 'omni_naming_peer.py'}:Echo"
    (tmp_path / "test_user.py").write_text(USER_TESTS.format(idl=str(BENCH_IDL), pids=str(pids), peer=peer))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=240, env=env, check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "2 passed" in done.stdout
    started = json.loads(pids.read_text())
    assert len(started) == 2 and not any(alive(pid) for pid in started)


def test_server_process_of_a_program_that_prints_only_its_ior(pyorb_server_process: Any,
                                                              pyorb_sync_client: SyncClient) -> None:
    echo = pyorb_server_process([sys.executable, "-m", "pyorb.servers.echo"], lines=1)
    assert echo.corbaloc == f"corbaloc:iiop:1.2@127.0.0.1:{echo.port}/Echo"  # made from the IOR
    assert pyorb_sync_client.resolve(echo.corbaloc, Bench.Echo).ping(99) == 99
    assert echo.stop() == 0 and not alive(echo.pid)  # it left cleanly on stdin EOF / SIGTERM


@pytest.mark.parametrize("model", [None, "thread_pool(2)"])
def test_sink_prints_ior_and_corbaloc_and_applies_its_delay(
    pyorb_sink: Any, pyorb_sync_client: SyncClient, model: str | None
) -> None:
    sink = pyorb_sink(0.05, model=model)
    assert sink.ior.startswith("IOR:") and sink.corbaloc == f"corbaloc:iiop:1.2@127.0.0.1:{sink.port}/Sink"
    worker = pyorb_sync_client.resolve(sink.ior, Bench.Sink)
    started = time.monotonic()
    assert worker.work(12345) == 12345
    assert time.monotonic() - started >= 0.05
    sink.stop()
    assert not alive(sink.pid)


def test_a_program_that_fails_to_start_is_reported_with_its_stderr() -> None:
    with pytest.raises(PeerProcessError, match="cannot listen: port taken"):
        ServerProcess([sys.executable, "-c", "import sys; sys.exit('cannot listen: port taken')"])


def test_a_program_that_prints_something_else_is_stopped() -> None:
    with pytest.raises(PeerProcessError, match="expected an IOR"):
        ServerProcess([sys.executable, "-c", "import time; print('hello', flush=True); time.sleep(60)"], lines=1)


def test_a_silent_program_times_out_and_is_killed(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    code = f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    with pytest.raises(PeerProcessError, match="no reference printed within 0.5 s"):
        ServerProcess([sys.executable, "-c", code], timeout=0.5)
    assert not alive(int(pidfile.read_text()))


def test_stopping_omninames_stops_the_real_program(tmp_path: Path) -> None:
    names = testkit.start_omninames(tmp_path)
    assert testkit.locate("127.0.0.1", names.port, b"NameService")
    assert not testkit.locate("127.0.0.1", names.port, b"NoSuchKey")
    names.stop()
    assert not alive(names.pid)
    assert not testkit.locate("127.0.0.1", names.port, b"NameService")


PEER_FUNCS = '''
def not_json(orb, obj):
    return object()
'''


def test_omni_call_reports_a_result_that_is_not_json(tmp_path: Path, pyorb_server: Any) -> None:
    funcs = tmp_path / "funcs.py"
    funcs.write_text(PEER_FUNCS)

    class Echo(pyorb.load_idl(BENCH_IDL).Bench__POA.Echo):  # type: ignore[misc]
        def ping(self, stamp: int) -> int:
            return stamp

        def notify(self, stamp: int) -> None:
            pass

    served = pyorb_server(Echo)
    with pytest.raises(PeerProcessError, match="not JSON serializable"):
        testkit.omni_call(BENCH_IDL, f"{funcs}:not_json", served.ior)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["serve", "--idl", "nowhere.idl", "--servant", "x:Y"], "IDL file not found: nowhere.idl"),
        (["serve", "--idl", str(BENCH_IDL), "--servant", "no_such_module:Y"], "cannot import no_such_module"),
        (["serve", "--idl", str(BENCH_IDL), "--servant", "Echo"], "not of the form module:name"),
        (["call", "--idl", str(BENCH_IDL), "--function", "json:dumps", "--target", "x", "--args", "{"],
         "--args is not JSON"),
        (["call", "--function", "json:dumps", "--target", "x", "--args", "{}"], "--args must be a JSON list"),
        (["fly"], "invalid choice"),
    ],
)
def test_omnipeer_bad_options_exit_2_with_a_message(args: list[str], message: str) -> None:
    done = subprocess.run([sys.executable, "-m", "pyorb.testing.omnipeer", *args], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL, check=False)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr


def _documented_pytest_settings() -> str:
    doc = (ROOT / "docs" / "naming-and-testing.md").read_text()
    return doc.split("```toml\n", 1)[1].split("```", 1)[0]


@pytest.mark.parametrize("configured", [True, False])
def test_the_documented_pytest_asyncio_setting_silences_its_deprecation_warning(
    tmp_path: Path, configured: bool,
) -> None:
    (tmp_path / "test_user.py").write_text(
        "import pytest, pytest_asyncio\n\n"
        "@pytest_asyncio.fixture\n"
        "async def value():\n"
        "    return 3\n\n"
        "@pytest.mark.asyncio\n"
        "async def test_plugin_fixture(pyorb_client, value):\n"
        "    assert value == 3 and pyorb_client is not None\n"
    )
    settings = _documented_pytest_settings() if configured else "[tool.pytest.ini_options]\n"
    (tmp_path / "pyproject.toml").write_text(settings)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error::DeprecationWarning"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )
    out = done.stdout + done.stderr
    if configured:
        assert done.returncode == 0, out
        assert "asyncio_default_fixture_loop_scope" not in out
    else:  # what the documentation saves a user from
        assert "asyncio_default_fixture_loop_scope" in out, out
