"""A bounded run of the atheris GIOP fuzz target, and checks of its seed corpus.

The long runs are for people (tests/fuzz/README.md); this one makes sure the
target still runs, that the corpus and the changes since cannot crash it in
a few seconds of fuzzing, and that the committed corpus is what
make_corpus.py writes.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from pyorb.giop import GIOPConnection, Message, ProtocolError, Role
from pyorb.giop.ior import IOR, parse_reference
from tests.giop.test_properties import run

pytestmark = pytest.mark.integration  # opens sockets or starts processes

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CORPUS = HERE / "corpus"
RUNS = 20_000
MAX_TOTAL_TIME_S = 60


def load_make_corpus() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_corpus", HERE / "make_corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_corpus_is_what_make_corpus_writes() -> None:
    expected = load_make_corpus().corpus()
    on_disk = {p.name: p.read_bytes() for p in CORPUS.iterdir()}
    assert on_disk == expected, "run tests/fuzz/make_corpus.py and commit tests/fuzz/corpus"


def parse_message_stream(data: bytes) -> list[Message]:
    """The messages of ``data`` as one of the two roles receives them."""
    errors = []
    for role in (Role.SERVER, Role.CLIENT):
        try:
            return run(GIOPConnection(role), [data])
        except ProtocolError as exc:
            errors.append(exc.reason)
    raise AssertionError(f"neither role accepts it: {errors}")


@pytest.mark.parametrize("name", sorted(p.name for p in CORPUS.iterdir()))
def test_seed_is_valid(name: str) -> None:
    """Seeds are valid input, so that fuzzing starts from deep inside the parsers."""
    data = (CORPUS / name).read_bytes()
    if name.startswith("ior-bytes"):
        assert IOR.from_bytes(data).iiop is not None
    elif name.startswith(("ior-string", "corbaloc")):
        assert parse_reference(data.decode()).iiop is not None
    else:
        assert parse_message_stream(data)


def test_bounded_fuzz_run(tmp_path: Path) -> None:
    pytest.importorskip("atheris", reason="atheris is not installed (Linux, Python < 3.14 only)")
    scratch = tmp_path / "corpus"  # libFuzzer adds what it finds to the first directory
    scratch.mkdir()
    command = [
        sys.executable,
        "-m",
        "tests.fuzz.fuzz_giop",
        str(scratch),
        str(CORPUS),
        f"-runs={RUNS}",
        f"-max_total_time={MAX_TOTAL_TIME_S}",
        "-seed=4",  # the same inputs on every run, so a failure reproduces
        f"-artifact_prefix={tmp_path}/",
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=MAX_TOTAL_TIME_S + 60, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},  # tests.fuzz from this checkout; crash files in tmp_path
    )
    crashes = [p.name for p in tmp_path.iterdir() if p.is_file()]
    report = f"exit {done.returncode}, artifacts {crashes}\n{done.stderr[-4000:]}"
    assert done.returncode == 0 and not crashes, report
    assert "Done " in done.stderr, report
