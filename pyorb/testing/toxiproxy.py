"""Network faults on loopback: a toxiproxy server driven through its HTTP API.

`toxiproxy <https://github.com/Shopify/toxiproxy>`_ is a TCP proxy that
injects faults ("toxics") into the connections it carries: latency and
jitter, bandwidth limits, resets, connections that stop forwarding, data
cut into small pieces.  This kernel has no netem, so this is how tests put
such faults between a client and one replica.  Install the server with
``go install github.com/Shopify/toxiproxy/v2/cmd/server@v2.9.0`` (``.ci/run``
puts it in ``~/.local/bin/toxiproxy-server``)::

    with Toxiproxy() as toxi:
        proxy = toxi.proxy("replica2", ("127.0.0.1", replica_port))
        ior = build_ior("IDL:Bench/Sink:1.0", "127.0.0.1", proxy.port, b"Sink")   # the replica, via the proxy
        proxy.latency(100, jitter=20)
        proxy.stall()                                                             # stops forwarding
        proxy.clear()

The server listens on a free loopback port, and so do its proxies; it is
stopped by its pid when the ``with`` block ends.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from pyorb.testing.kit import LOOPBACK, free_port

STARTUP_TIMEOUT_S = 15.0
# Where `go install` and .ci/run leave the server, after $PYORB_TOXIPROXY and PATH.
_CANDIDATES = ("~/.local/bin/toxiproxy-server", "~/go/bin/toxiproxy-server", "~/go/bin/server")


class ToxiproxyError(RuntimeError):
    """The toxiproxy server could not be found, started, or refused a request."""


def find_server() -> str | None:
    """The toxiproxy server program: $PYORB_TOXIPROXY, ``toxiproxy-server`` on
    PATH, or where ``go install`` puts it (None if none is there)."""
    named = os.environ.get("PYORB_TOXIPROXY")
    if named:
        return named if os.access(named, os.X_OK) else None
    found = shutil.which("toxiproxy-server")
    if found:
        return found
    for candidate in _CANDIDATES:
        path = Path(candidate).expanduser()
        if os.access(path, os.X_OK):
            return str(path)
    return None


class Toxiproxy:
    """A toxiproxy server process on loopback and the proxies made on it."""

    def __init__(self, program: str | None = None, host: str = LOOPBACK) -> None:
        self.program = program or find_server()
        self.host = host
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._log = tempfile.TemporaryFile()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> Toxiproxy:
        """Start the server and wait until its API answers.

        Raises :class:`ToxiproxyError` if there is no server program, or it
        exits or does not answer within ``STARTUP_TIMEOUT_S`` seconds."""
        if self.program is None:
            raise ToxiproxyError("no toxiproxy server: install it with `go install "
                                 "github.com/Shopify/toxiproxy/v2/cmd/server@v2.9.0` or set PYORB_TOXIPROXY")
        self.port = free_port(self.host)
        self.proc = subprocess.Popen([self.program, "-host", self.host, "-port", str(self.port)],
                                     stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log,
                                     start_new_session=True)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            try:
                self.request("GET", "/version")
                return self
            except ToxiproxyError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise ToxiproxyError(f"toxiproxy ({self.program}) did not start on {self.url}: "
                                         f"{self.log()[-2000:]}") from None
                time.sleep(0.05)

    def log(self) -> str:
        """What the server wrote so far."""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One API request; its JSON answer (None if empty).  Raises
        :class:`ToxiproxyError` with the server's reason on failure."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                text = response.read()
        except urllib.error.HTTPError as exc:
            reason = exc.read().decode(errors="replace").strip()
            raise ToxiproxyError(f"toxiproxy at {self.url} refused {method} {path}: {exc.code} {reason}") from None
        except OSError as exc:
            raise ToxiproxyError(f"toxiproxy at {self.url} did not answer {method} {path}: {exc}") from None
        return json.loads(text) if text.strip() else None

    def proxy(self, name: str, upstream: tuple[str, int]) -> Proxy:
        """A new proxy to ``upstream`` (host, port), listening on a free loopback port."""
        made = self.request("POST", "/proxies", {"name": name, "listen": f"{self.host}:0",
                                                 "upstream": f"{upstream[0]}:{upstream[1]}", "enabled": True})
        host, _, port = made["listen"].rpartition(":")
        return Proxy(self, name, host, int(port))

    def stop(self) -> None:
        """Stop the server by its pid (SIGTERM, then SIGKILL)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def __enter__(self) -> Toxiproxy:
        return self.start()

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
        self._log.close()


class Proxy:
    """One proxy: clients connect to ``host:port``, it connects to its upstream.

    Toxics act on the ``downstream`` direction (upstream to client) unless
    told otherwise; each returns its name, for :meth:`remove`."""

    def __init__(self, server: Toxiproxy, name: str, host: str, port: int) -> None:
        self.server, self.name, self.host, self.port = server, name, host, port

    def add(self, kind: str, stream: str = "downstream", toxicity: float = 1.0, **attributes: Any) -> str:
        """Add a toxic of type ``kind`` (toxiproxy's name) with its ``attributes``."""
        name = f"{kind}_{stream}"
        self.server.request("POST", f"/proxies/{self.name}/toxics",
                            {"name": name, "type": kind, "stream": stream, "toxicity": toxicity,
                             "attributes": attributes})
        return name

    def remove(self, toxic: str) -> None:
        self.server.request("DELETE", f"/proxies/{self.name}/toxics/{toxic}")

    def clear(self) -> None:
        """Remove every toxic of this proxy."""
        for toxic in self.server.request("GET", f"/proxies/{self.name}/toxics") or ():
            self.remove(toxic["name"])

    def latency(self, ms: int, jitter: int = 0, stream: str = "downstream") -> str:
        """Each piece of data waits ``ms`` ± ``jitter`` milliseconds."""
        return self.add("latency", stream, latency=ms, jitter=jitter)

    def bandwidth(self, kilobytes_per_second: int, stream: str = "downstream") -> str:
        return self.add("bandwidth", stream, rate=kilobytes_per_second)

    def reset_peer(self, after_ms: int = 0, stream: str = "downstream") -> str:
        """Connections are reset (TCP RST) ``after_ms`` milliseconds after data arrives or they open."""
        return self.add("reset_peer", stream, timeout=after_ms)

    def stall(self, stream: str = "downstream") -> str:
        """Stop forwarding data and keep connections open: a half-open peer."""
        return self.add("timeout", stream, timeout=0)

    def slicer(self, average_size: int, size_variation: int = 0, delay_us: int = 0,
               stream: str = "downstream") -> str:
        """Cut the data into pieces of about ``average_size`` bytes, ``delay_us`` apart."""
        return self.add("slicer", stream, average_size=average_size, size_variation=size_variation, delay=delay_us)

    def disable(self) -> None:
        """Close its connections and refuse new ones."""
        self.server.request("POST", f"/proxies/{self.name}", {"enabled": False})

    def enable(self) -> None:
        self.server.request("POST", f"/proxies/{self.name}", {"enabled": True})
