"""Every fenced code block of README.md and docs/*.md runs as written.

How a block is run depends on its info string (the words after the fence):

``python``
    A complete program: saved to a file and run with this Python; it must
    exit 0 within PYTHON_TIMEOUT seconds.
``python pytest``
    A test module: run with pytest (the pyorb plugin's fixtures come from
    its entry point); every test in it must pass.
``python server``
    A server program: started, given until its first line of output (and
    a moment more to reach its serving loop), then sent SIGTERM; it must
    exit 0 within SERVER_STOP_TIMEOUT seconds.
``sh`` / ``bash``
    Shell commands.  The shell blocks of one Markdown file run in order in
    one bash process, so a block sees the variables and background servers
    of the blocks before it.  Each block runs under ``set -e -o pipefail``
    with stdin from /dev/null and must succeed within SHELL_TIMEOUT seconds.
``console``
    A transcript: ``$ command`` lines, each followed by its output.  Each
    command runs in the file's shell (after the file's earlier blocks).  A
    command whose output shows a line starting with ``error:`` must fail
    (non-zero status) and print that same line; any other must exit 0.  A
    command whose output shows ``^C`` serves until interrupted: it is
    started on its own, given until its first line of output, then sent
    SIGINT, and must stop.
``<any of these> no-run``
    Shown, not run: for commands that run for minutes or change the
    installation.  Say why in the surrounding text.  Prefer a runnable
    example (one that starts the server it needs, with small counts).
other languages (``text``, ``idl``, ...)
    Not code to run.

Every block runs in a scratch directory that looks like a checkout of this
repository (its top-level files and folders are symlinked there: ``idl/``,
``examples/``, ``tests/peers/``, ...), so that relative paths in the docs
work and nothing an example writes lands in the repository.  In shell and
console blocks the text ``/tmp/`` is replaced by a private directory, so
that two runs of this test at once do not share files.  Blocks of different
files (and python blocks) run concurrently, so an example must not count on
a fixed port or on a file another page writes.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

pytestmark = pytest.mark.integration  # opens sockets or starts processes

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN_LANGUAGES = {"python", "sh", "bash", "console"}
SHOWN_LANGUAGES = {"", "text", "idl", "json", "toml", "ini", "csv", "markdown"}
NO_RUN = "no-run"
PYTHON_TIMEOUT = 90.0
SHELL_TIMEOUT = 120.0
COMMAND_TIMEOUT = 60.0
SERVER_STOP_TIMEOUT = 30.0
SERVER_SETTLE = 1.0
WORKERS = 4
NOT_MIRRORED = {".git", ".venv", ".mypy_cache", ".pytest_cache", ".hypothesis", "__pycache__"}
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)(?P<info>.*)$")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a Markdown file."""

    doc: Path
    line: int
    info: tuple[str, ...]
    text: str
    index: int
    """Position among the file's blocks, counting from 0."""

    @property
    def language(self) -> str:
        return self.info[0] if self.info else ""

    @property
    def runnable(self) -> bool:
        return self.language in RUN_LANGUAGES and NO_RUN not in self.info

    @property
    def uses_shell(self) -> bool:
        return self.language in {"sh", "bash", "console"}

    @property
    def name(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}:{'-'.join(self.info) or 'plain'}"


def blocks_of(doc: Path) -> list[Block]:
    """The fenced blocks of ``doc``, in order (``line`` is the opening fence's, from 1)."""
    found: list[Block] = []
    lines = doc.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        start = FENCE.match(lines[i])
        i += 1
        if start is None:
            continue
        indent, fence, opened = len(start["indent"]), start["fence"], i
        body: list[str] = []
        while i < len(lines) and not lines[i].strip().startswith(fence):
            line = lines[i]
            body.append(line[indent:] if line[:indent].strip() == "" else line.lstrip())
            i += 1
        i += 1  # the closing fence
        text = "\n".join(body) + "\n"
        found.append(Block(doc, opened, tuple(start["info"].split()), text, len(found)))
    return found


ALL_BLOCKS = [block for doc in DOCS for block in blocks_of(doc)]
RUNNABLE = [block for block in ALL_BLOCKS if block.runnable]


# -- a scratch checkout --------------------------------------------------------------------------------
def make_checkout(where: Path) -> Path:
    """A directory whose entries are symlinks to the repository's top-level ones."""
    where.mkdir(parents=True, exist_ok=True)
    for entry in ROOT.iterdir():
        if entry.name not in NOT_MIRRORED:
            (where / entry.name).symlink_to(entry)
    return where


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTEST_CURRENT_TEST", None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # no __pycache__ in the repository through the symlinks
    env["COLUMNS"] = "200"  # rich wraps long lines at 80 columns when not on a terminal
    return env


# -- a shell shared by the blocks of one file ---------------------------------------------------------
class Shell:
    """A bash process in its own session; runs blocks and reports their status and output."""

    MARK = "__pyorb_docs_status__"

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.tmp = cwd / ".tmp"
        self.tmp.mkdir(exist_ok=True)
        self.proc = subprocess.Popen(
            ["bash", "--noprofile", "--norc"], cwd=cwd, env=child_env(), stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.count = 0

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(self, script: str, timeout: float) -> tuple[int, str]:
        """Run ``script`` in this shell; its status (or -1 on timeout, or the
        shell's own if it exited) and everything it printed."""
        self.count += 1
        path = self.cwd / f".docs-block-{self.count}.sh"
        path.write_text(script, encoding="utf-8")
        assert self.proc.stdin is not None
        self.proc.stdin.write(f". {path} </dev/null; printf '\\n{self.MARK} %d\\n' $?\n")
        self.proc.stdin.flush()
        return self._collect(timeout)

    def _collect(self, timeout: float) -> tuple[int, str]:
        out: list[str] = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.close()
                return -1, "".join(out) + f"\n[timed out after {timeout:.0f} s]"
            if line is None:
                return self.proc.wait(), "".join(out)
            if line.startswith(self.MARK):
                return int(line.split()[1]), "".join(out)[:-1]  # the newline printed before the mark
            out.append(line)

    def close(self) -> None:
        """End the shell and whatever it left running (its session is ours alone)."""
        if self.alive and self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.reader.join(timeout=10)
        if not self.reader.is_alive() and self.proc.stdout is not None:
            self.proc.stdout.close()


class DocRuns:
    """Runs the selected blocks in the background, WORKERS at a time (the
    examples mostly wait on sockets and subprocesses): each python block on
    its own, the shell blocks of one file in order in one shell, from the
    file's first shell block (a test selected alone still gets its file's
    earlier blocks run first).  A test waits for its own block's outcome."""

    def __init__(self, blocks: list[Block], scratch: Path) -> None:
        self.pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="doc-block")
        self.outcomes: dict[Block, Future[None]] = {}
        last: dict[Path, int] = {}
        for block in blocks:
            if block.uses_shell:
                last[block.doc] = max(last.get(block.doc, 0), block.index)
        for doc, index in last.items():  # the longest chains first
            chain = [b for b in RUNNABLE if b.doc == doc and b.uses_shell and b.index <= index]
            futures: dict[Block, Future[None]] = {b: Future() for b in chain}
            self.outcomes.update(futures)
            self.pool.submit(self._run_chain, futures, scratch / doc.stem)
        for block in blocks:
            if not block.uses_shell:
                where = scratch / f"{block.doc.stem}-{block.index}"
                self.outcomes[block] = self.pool.submit(run_python, block, where)

    @staticmethod
    def _run_chain(futures: dict[Block, Future[None]], where: Path) -> None:
        shell = Shell(make_checkout(where))
        failed: Block | None = None
        try:
            for block, outcome in futures.items():
                if failed is not None:
                    outcome.set_exception(pytest.fail.Exception(f"{block.name} needs {failed.name}, which failed"))
                    continue
                try:
                    run_in_shell(shell, block)
                except BaseException as exc:  # pytest's own failures are BaseExceptions
                    failed = block
                    outcome.set_exception(exc)
                else:
                    outcome.set_result(None)
        finally:
            shell.close()

    def wait(self, block: Block) -> None:
        """Return once ``block`` ran, or raise its failure."""
        self.outcomes[block].result()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="module")
def doc_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DocRuns]:
    selected = [item.callspec.params["block"] for item in request.session.items
                if getattr(item, "originalname", "") == "test_doc_block_runs" and hasattr(item, "callspec")]
    runs = DocRuns(selected, tmp_path_factory.mktemp("docs"))
    yield runs
    runs.close()


# -- running each kind of block -----------------------------------------------------------------------
def run_in_shell(shell: Shell, block: Block) -> None:
    # /tmp/ is mapped to the shell's own directory: two test runs at once must not share files.
    text = block.text.replace("/tmp/", f"{shell.tmp}/")
    if block.language == "console":
        for command, shown in transcript(text):
            check_command(shell, block, command, shown)
        return
    status, out = shell.run(f"set -e -o pipefail\n{text}set +e +o pipefail\n", SHELL_TIMEOUT)
    assert status == 0, f"{block.name} failed (status {status}):\n{out}"


def transcript(text: str) -> list[tuple[str, list[str]]]:
    """``(command, shown output lines)`` of each ``$ `` line of a console block."""
    steps: list[tuple[str, list[str]]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            if steps:
                steps[-1][1].append(lines[i])
            i += 1
            continue
        command = lines[i][2:]
        while command.endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command[:-1] + " " + lines[i].strip()
        steps.append((command, []))
        i += 1
    return steps


def check_command(shell: Shell, block: Block, command: str, shown: list[str]) -> None:
    if any(line.startswith("^C") for line in shown):
        check_interrupted(shell.cwd, block, command)
        return
    errors = [line for line in shown if line.startswith("error:")]
    status, out = shell.run(f"{command}\n", COMMAND_TIMEOUT)
    where = f"{block.name}: $ {command}"
    assert status != -1, f"{where} timed out:\n{out}"
    if not errors:
        assert status == 0, f"{where} failed (status {status}):\n{out}"
        return
    assert status > 0, f"{where} should fail as shown, but exited {status}:\n{out}"
    printed = out.splitlines()
    for line in errors:
        assert line in printed, f"{where} printed, instead of {line!r}:\n{out}"


@contextmanager
def serving(argv: list[str], cwd: Path, what: str, timeout: float) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A server started in its own session, with its first line of output once it printed one;
    killed (its whole session) on leaving if it still runs."""
    proc = subprocess.Popen(argv, cwd=cwd, env=child_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        assert proc.stdout is not None
        first: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: first.put(proc.stdout.readline() if proc.stdout else ""),
                         daemon=True).start()
        line = first.get(timeout=timeout)
        assert line and proc.poll() is None, f"{what} did not start serving: {line!r}"
        yield proc, line
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def check_interrupted(cwd: Path, block: Block, command: str) -> None:
    """A server shown stopped with ^C: start it, wait for its first output, interrupt it."""
    with serving(["bash", "-c", f"exec {command}"], cwd, f"{block.name}: $ {command}", COMMAND_TIMEOUT) as (proc, _):
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=15)


def run_python(block: Block, where: Path) -> None:
    checkout = make_checkout(where)
    if "server" in block.info:
        run_server(block, checkout)
        return
    script = checkout / ("test_doc_block.py" if "pytest" in block.info else "doc_block.py")
    script.write_text(block.text, encoding="utf-8")
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", script.name] if "pytest" in block.info \
        else [sys.executable, script.name]
    try:
        done = subprocess.run(argv, cwd=checkout, env=child_env(), stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=PYTHON_TIMEOUT, check=False)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{block.name} timed out after {PYTHON_TIMEOUT:.0f} s:\n{exc.stdout!r}\n{exc.stderr!r}")
    assert done.returncode == 0, f"{block.name} failed (status {done.returncode}):\n{done.stdout}\n{done.stderr}"


def run_server(block: Block, checkout: Path) -> None:
    """A server program: it must print a line, serve, and exit 0 on SIGTERM."""
    script = checkout / "doc_server.py"
    script.write_text(block.text, encoding="utf-8")
    with serving([sys.executable, script.name], checkout, block.name, PYTHON_TIMEOUT) as (proc, line):
        time.sleep(SERVER_SETTLE)  # from its announcement to its serving loop
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=SERVER_STOP_TIMEOUT)
        assert proc.returncode == 0, f"{block.name} exited {proc.returncode} on SIGTERM:\n{line}{rest}"


@pytest.mark.parametrize("block", RUNNABLE, ids=[block.name for block in RUNNABLE])
def test_doc_block_runs(block: Block, doc_runs: DocRuns) -> None:
    doc_runs.wait(block)


# -- the conventions themselves -------------------------------------------------------------------------
@pytest.mark.parametrize("block", ALL_BLOCKS, ids=[block.name for block in ALL_BLOCKS])
def test_info_string_is_known(block: Block) -> None:
    """A misspelt language (```pyhton) would silently escape the runner."""
    assert block.language in RUN_LANGUAGES | SHOWN_LANGUAGES, f"{block.name}: unknown language {block.language!r}"
    extra = set(block.info[1:]) - {NO_RUN, "pytest", "server"}
    assert not extra, f"{block.name}: unknown words in the info string: {sorted(extra)}"
    for word in ("pytest", "server"):
        if word in block.info:
            assert block.language == "python", f"{block.name}: {word!r} goes with python blocks only"


def test_blocks_are_found() -> None:
    """The parser sees the blocks it should (a regression here would silently test nothing)."""
    assert len(RUNNABLE) >= 20
    assert {block.doc.name for block in RUNNABLE} >= {"README.md", "cli.md", "getting-started.md"}
    sample = blocks_of(ROOT / "README.md")
    assert [b.language for b in sample][:4] == ["sh", "sh", "sh", "python"]
    assert "asyncio.run(main())" in sample[3].text
    assert len(LINK.findall("".join(block_free_lines(ROOT / "docs" / "index.md")))) >= 12


def test_the_readme_says_how_long_the_tests_take_and_gives_a_quick_subset() -> None:
    """A contributor knows what the full command costs and what to run before a commit."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert re.search(r"The whole suite\s+takes about \w+ minutes on a 2-core machine", text)
    (quick,) = [b for b in blocks_of(ROOT / "README.md") if "tests/test_architecture.py" in b.text]
    paths = re.findall(r"tests/\S+\.py", quick.text)
    assert len(paths) >= 5 and all((ROOT / path).is_file() for path in paths), paths
    assert "python -m mypy pyorb" in quick.text


def test_transcript_pairs_commands_with_their_output() -> None:
    steps = transcript("$ pyorb ior IOR:zz\nerror: malformed IOR\n$ a \\\n  b\nok\n")
    assert steps == [("pyorb ior IOR:zz", ["error: malformed IOR"]), ("a  b", ["ok"])]


LINK = re.compile(r"\]\((?P<target>[^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("doc", DOCS, ids=[str(doc.relative_to(ROOT)) for doc in DOCS])
def test_relative_links_resolve(doc: Path) -> None:
    """The guide's pages link to each other and to the code: no link leads nowhere."""
    text = "".join(block_free_lines(doc))
    broken = [m["target"] for m in LINK.finditer(text)
              if "://" not in m["target"] and not m["target"].startswith("mailto:")
              and not (doc.parent / m["target"]).exists()]
    assert not broken, f"{doc.relative_to(ROOT)} links to missing files: {broken}"


def block_free_lines(doc: Path) -> list[str]:
    """The lines of ``doc`` outside fenced code blocks."""
    lines, inside = [], False
    for line in doc.read_text(encoding="utf-8").splitlines(keepends=True):
        if FENCE.match(line):
            inside = not inside
        elif not inside:
            lines.append(line)
    return lines
