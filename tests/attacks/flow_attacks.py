"""Well-formed GIOP traffic that abuses flow, not values.

Each attack talks raw GIOP to Hardening::Target (idl/hardening.idl, object
key ``Target``) on loopback and is bounded in count and time.  Shared by
tests/test_hardening_flow.py and tests/attacks/attack_flow.py; the quiet client
and the memory sampler that watch an attack are here too.
"""

from __future__ import annotations

import select
import socket
import statistics
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import psutil

from pyorb.giop import codec
from pyorb.giop.messages import GIOP_1_2, CancelRequest, LocateRequest, Request

KEY = b"Target"
MiB = 1024 * 1024
_FRAGMENT, _MORE = 7, 0x02


def request(operation: str, body: bytes, request_id: int = 1, key: bytes = KEY) -> bytes:
    return codec.encode(Request(request_id=request_id, response_flags=3, object_key=key, operation=operation,
                                body=body))


def ping(request_id: int = 1) -> bytes:
    return request("ping", struct.pack("<i", 7), request_id)


def replies(sock: socket.socket, n: int, timeout: float) -> dict[int, bytes]:
    """Up to ``n`` replies by request id (their bodies), until EOF or ``timeout``."""
    sock.settimeout(timeout)
    got: dict[int, bytes] = {}
    data = b""
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except (socket.timeout, ConnectionResetError):
            break
        if not chunk:
            break
        data += chunk
        while len(data) >= 12 and len(data) >= 12 + struct.unpack("<I", data[8:12])[0]:
            size = struct.unpack("<I", data[8:12])[0]
            message, data = data[:12 + size], data[12 + size:]
            if message[7] == 1:
                got[struct.unpack("<I", message[12:16])[0]] = message[16:]
    return got


def _connect(port: int, timeout: float = 5.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def _drain(sock: socket.socket, stop: threading.Event, counts: list[int]) -> None:
    # Reads and counts whole messages until EOF, an error or ``stop``.
    pending = b""
    while not stop.is_set():
        try:
            chunk = sock.recv(1 << 20)
        except OSError:
            return
        if not chunk:
            return
        pending += chunk
        while len(pending) >= 12:
            size = struct.unpack("<I" if pending[6] & 1 else ">I", pending[8:12])[0]
            if len(pending) < 12 + size:
                break
            counts[0] += 1
            pending = pending[12 + size:]


def flood(port: int, messages: bytes, count: int, seconds: float) -> dict[str, float]:
    """Send ``count`` copies of ``messages`` (one or more pipelined requests) as fast as the server takes
    them, reading the replies on another thread; stop after ``seconds`` at most."""
    per = messages.count(b"GIOP")
    sock = _connect(port)
    sock.settimeout(None)
    stop = threading.Event()
    replies = [0]
    reader = threading.Thread(target=_drain, args=(sock, stop, replies), daemon=True)
    reader.start()
    batch = messages * max(1, 4096 // per)
    sent = 0
    t0 = time.monotonic()
    deadline = t0 + seconds
    try:
        while sent < count and time.monotonic() < deadline:
            sock.sendall(batch)
            sent += len(batch) // len(messages) * per
        while replies[0] < sent and time.monotonic() < deadline:
            time.sleep(0.01)
    except OSError:
        pass
    elapsed = time.monotonic() - t0
    stop.set()
    sock.close()
    reader.join(2)
    return {"sent": sent, "answered": replies[0], "seconds": elapsed}


def unread(port: int, count: int, size: int, hold: float) -> str:
    """Ask for ``count`` replies of ``size`` octets, read none for ``hold`` seconds; what became of the connection."""
    sock = _connect(port)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    body = struct.pack("<i", size)
    try:
        sock.sendall(b"".join(request("blob", body, i + 1) for i in range(count)))
    except OSError as exc:
        sock.close()
        return f"send failed: {type(exc).__name__}"
    time.sleep(hold)
    return _fate(sock, 2.0)


def _fate(sock: socket.socket, quiet: float) -> str:
    """Read what is left: 'aborted' (reset), 'closed' (EOF) or 'open' (no end within ``quiet`` s of silence)."""
    sock.settimeout(quiet)
    try:
        while True:
            if not sock.recv(1 << 20):
                return "closed"
    except ConnectionResetError:
        return "aborted"
    except socket.timeout:
        return "open"
    except OSError as exc:
        return type(exc).__name__
    finally:
        sock.close()


def _fragment(request_id: int, data: bytes, more: bool) -> bytes:
    flags = 1 | (_MORE if more else 0)
    return b"GIOP\x01\x02" + bytes((flags, _FRAGMENT)) + struct.pack("<II", 4 + len(data), request_id) + data


def start_train(request_id: int, first: int) -> bytes:
    """The first message of a fragmented take() request whose body would continue with more fragments."""
    whole = request("take", b"\x00" * first, request_id)
    # Its body stays a multiple of 8 (GIOP 1.2 requires it of every fragment but the last).
    return whole[:6] + bytes((whole[6] | _MORE,)) + whole[7:]


def trains(port: int, n: int, size: int, cancel_every: float, seconds: float) -> dict[str, object]:
    """Open ``n`` fragment trains of ``size`` octets each and never finish them, sending a CancelRequest every
    ``cancel_every`` s; when did the server drop the connection (None: not within ``seconds``)."""
    sock = _connect(port)
    t0 = time.monotonic()
    chunk = b"\x00" * MiB
    try:
        for i in range(n):
            sock.sendall(start_train(1000 + i, 64))
            for _ in range(size // MiB):
                sock.sendall(_fragment(1000 + i, chunk, more=True))
        while time.monotonic() - t0 < seconds:
            sock.sendall(codec.encode(CancelRequest(request_id=1, version=GIOP_1_2)))
            readable, _, _ = select.select([sock], [], [], cancel_every)
            if readable and not sock.recv(65536):
                return {"dropped after s": time.monotonic() - t0}
    except OSError:
        return {"dropped after s": time.monotonic() - t0}
    finally:
        sock.close()
    return {"dropped after s": None}


def locate_storm(key: bytes = b"NoSuchObject") -> bytes:
    return codec.encode(LocateRequest(request_id=1, object_key=key))


def connections(port: int, n: int, hold: float, seconds: float = 20.0) -> Counter[str]:
    """Open ``n`` connections that send nothing (giving up after ``seconds``); how each fared within ``hold`` s:
    'open', 'CloseConnection', 'reset', 'closed', the error of connect, or 'not tried' (out of time)."""
    socks: list[socket.socket] = []
    fates: Counter[str] = Counter()
    deadline = time.monotonic() + seconds
    for i in range(n):
        if time.monotonic() > deadline:
            fates["not tried"] += n - i
            break
        try:
            socks.append(_connect(port, timeout=2.0))
        except OSError as exc:
            fates[f"connect: {type(exc).__name__}"] += 1
    time.sleep(hold)  # whatever the server tells them has arrived by now
    for sock in socks:
        sock.setblocking(False)
        try:
            data = sock.recv(64)
            fates["CloseConnection" if data[:4] == b"GIOP" and data[7] == 5 else ("closed" if not data else "other")] += 1
        except BlockingIOError:
            fates["open"] += 1
        except ConnectionResetError:
            fates["reset"] += 1
        except OSError as exc:
            fates[type(exc).__name__] += 1
    for sock in socks:
        sock.close()
    return fates


# -- watching an attack ---------------------------------------------------------

@dataclass
class Watch:
    """A quiet client pinging every ``period`` s on its own connection and the server's RSS sampled every 10 ms."""

    port: int
    pid: int
    period: float = 0.05
    timeout: float = 5.0  # a ping unanswered this long is lost; slower ones are latency (a loaded machine stalls seconds)
    latencies: list[float] = field(default_factory=list)
    lost: int = 0
    rss_peak: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def __enter__(self) -> Watch:
        self._threads = [threading.Thread(target=self._quiet, daemon=True),
                         threading.Thread(target=self._sample, daemon=True)]
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(5)

    def _quiet(self) -> None:
        sock: socket.socket | None = None
        rid = 0
        while not self._stop.is_set():
            rid += 1
            t0 = time.perf_counter()
            try:
                if sock is None:
                    sock = _connect(self.port, timeout=self.timeout)
                sock.sendall(ping(rid))
                data = b""
                while len(data) < 12 or len(data) < 12 + struct.unpack("<I", data[8:12])[0]:
                    chunk = sock.recv(4096)
                    if not chunk:
                        raise ConnectionError("closed")
                    data += chunk
                if data[7] != 1 or b"CORBA/" in data:
                    raise ConnectionError("not a normal reply")
                self.latencies.append(time.perf_counter() - t0)
            except OSError:
                self.lost += 1
                if sock is not None:
                    sock.close()
                sock = None
            self._stop.wait(self.period)
        if sock is not None:
            sock.close()

    def _sample(self) -> None:
        try:
            proc = psutil.Process(self.pid)
            while not self._stop.is_set():
                self.rss_peak = max(self.rss_peak, proc.memory_info().rss)
                time.sleep(0.01)
        except psutil.Error:
            pass

    def summary(self) -> dict[str, float]:
        lat = sorted(self.latencies)
        return {"rss_mib": self.rss_peak / MiB, "lost": self.lost, "pings": len(lat),
                "p50_ms": statistics.median(lat) * 1e3 if lat else float("nan"),
                "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e3 if lat else float("nan")}


def rss_mib(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / MiB
