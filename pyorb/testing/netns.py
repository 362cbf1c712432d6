"""Several hosts on one Linux machine: network namespaces on a private bridge.

:class:`Network` makes one network namespace per host, each with its own
address on a bridge that has none in the machine's own namespace (so
nothing is routed outside, and the machine's other interfaces are out of
reach), its own host name (a UTS namespace per process started in it) and
an ``/etc/hosts`` naming every host of the network (``ip netns exec``
mounts ``/etc/netns/<namespace>/hosts`` over it).  Processes started in a
host are stopped, and every namespace, link and file is removed, when the
``with`` block ends, by error or not.  It needs root (CAP_NET_ADMIN and
CAP_SYS_ADMIN) and the ``ip`` and ``unshare`` commands.

    with Network(["sink1", "sink2", "client"]) as net:
        sink = net.start("sink1", [sys.executable, "-m", "pyorb.servers.sink", "--host", "0.0.0.0"])
        ...
"""

from __future__ import annotations

import ipaddress
import itertools
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path
from types import TracebackType
from typing import Sequence

from pyorb.testing.kit import ServerProcess, child_env

NETNS_DIR = Path("/etc/netns")
_NETWORKS = itertools.count()


def missing() -> str | None:
    """Why namespaces cannot be made here (None if they can)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "unshare"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH"
    return None


def require() -> None:
    """For a test: skip it if namespaces cannot be made here, fail it on CI
    (which runs as root, so there it must not skip)."""
    import pytest

    reason = missing()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"CI runs as root, yet: {reason}")
        pytest.skip(reason)


def reap_stale() -> None:
    """Remove what networks of processes that no longer exist left behind (a
    test run killed with SIGKILL cannot clean up after itself)."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30, check=False)
    tags = {m.group(1) for m in re.finditer(r"^(po(\d+)n\d+)-\S+", listed.stdout, re.M) if not _alive(int(m.group(2)))}
    for tag in tags:
        for line in listed.stdout.splitlines():
            name = line.split()[0] if line.strip() else ""
            if name.startswith(f"{tag}-"):
                subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30, check=False)
                shutil.rmtree(NETNS_DIR / name, ignore_errors=True)
        subprocess.run(["ip", "link", "del", f"{tag}br"], capture_output=True, timeout=30, check=False)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _run(*argv: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")


class Network:
    """Hosts in network namespaces on one private bridge (``subnet``, /24)."""

    def __init__(self, hosts: Sequence[str], subnet: str = "10.213.7.0/24") -> None:
        if len(set(hosts)) != len(hosts) or not hosts:
            raise ValueError("give distinct host names")
        # Unique per process and network; interface names stay within 15 characters.
        self.tag = f"po{os.getpid()}n{next(_NETWORKS) % 100}"
        net = ipaddress.ip_network(subnet)
        self.addresses = {host: str(net.network_address + i + 1) for i, host in enumerate(hosts)}
        self.prefix = net.prefixlen
        self.bridge = f"{self.tag}br"
        self._made: list[tuple[str, ...]] = []  # undo commands, last first
        self.processes: list[ServerProcess] = []
        self.children: list[subprocess.Popen[bytes]] = []

    def namespace(self, host: str) -> str:
        return f"{self.tag}-{host}"

    def __enter__(self) -> Network:
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def _build(self) -> None:
        reap_stale()
        _run("ip", "link", "add", self.bridge, "type", "bridge")
        self._made.append(("ip", "link", "del", self.bridge))
        _run("ip", "link", "set", self.bridge, "up")
        hosts_file = "".join(f"{address} {host}\n" for host, address in self.addresses.items())
        for i, (host, address) in enumerate(self.addresses.items()):
            ns = self.namespace(host)
            outside, inside = f"{self.tag}v{i}", f"{self.tag}p{i}"
            _run("ip", "netns", "add", ns)
            self._made.append(("ip", "netns", "del", ns))
            etc = NETNS_DIR / ns
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text(f"127.0.0.1 localhost\n::1 localhost\n{hosts_file}")
            self._made.append(("rm", "-rf", str(etc)))
            _run("ip", "link", "add", outside, "type", "veth", "peer", "name", inside)
            self._made.append(("ip", "link", "del", outside))
            _run("ip", "link", "set", outside, "master", self.bridge)
            _run("ip", "link", "set", outside, "up")
            _run("ip", "link", "set", inside, "netns", ns)
            _run("ip", "netns", "exec", ns, "ip", "link", "set", inside, "name", "eth0")
            _run("ip", "netns", "exec", ns, "ip", "addr", "add", f"{address}/{self.prefix}", "dev", "eth0")
            _run("ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "up")
            _run("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")

    def partition(self, host: str) -> None:
        """Cut ``host`` off the network: its link goes down, so what is sent
        to it or from it is dropped without a word (no reset, no refusal),
        and its connections stay open on both ends until :meth:`heal`."""
        self._link(host, "down")

    def heal(self, host: str) -> None:
        """Bring ``host``'s link back up after :meth:`partition`."""
        self._link(host, "up")

    def _link(self, host: str, state: str) -> None:
        if host not in self.addresses:
            raise KeyError(f"no host {host!r} in this network")
        _run("ip", "netns", "exec", self.namespace(host), "ip", "link", "set", "eth0", state)

    def command(self, host: str, argv: Sequence[str]) -> list[str]:
        """``argv`` run in ``host``: its namespace, its host name."""
        if host not in self.addresses:
            raise KeyError(f"no host {host!r} in this network")
        return ["ip", "netns", "exec", self.namespace(host), "unshare", "--uts", "sh", "-c",
                f'hostname {host} && exec "$@"', "sh", *argv]

    def start(self, host: str, argv: Sequence[str], lines: int = 2) -> ServerProcess:
        """A server in ``host`` that prints its reference (see :class:`ServerProcess`)."""
        process = ServerProcess(self.command(host, argv), lines=lines)
        self.processes.append(process)
        return process

    def popen(self, host: str, argv: Sequence[str], stdout: int | None = None,
              stderr: int | None = None) -> subprocess.Popen[bytes]:
        """Any process in ``host`` (killed at the end if still running)."""
        child = subprocess.Popen(self.command(host, argv), start_new_session=True, stdin=subprocess.DEVNULL,
                                 stdout=stdout, stderr=stderr, env=child_env())
        self.children.append(child)
        return child

    def run(self, host: str, argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` in ``host`` to completion; its output as text."""
        return subprocess.run(self.command(host, argv), capture_output=True, text=True, timeout=timeout,
                              check=False, stdin=subprocess.DEVNULL, env=child_env())

    def close(self) -> None:
        for process in self.processes:
            process.stop()
        for child in self.children:
            if child.poll() is None:
                try:
                    os.killpg(child.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                child.wait()
        for undo in reversed(self._made):
            subprocess.run(undo, capture_output=True, timeout=30, check=False)
        self._made.clear()

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
