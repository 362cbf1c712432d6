"""Closed queueing-network models of pyorb's dispatch strategies.

Each model turns a :class:`Workload` (N clients, think time Z, servant CPU
per call, blocking delay per call) and a :class:`Calibration` (what pyorb
itself costs per call under each strategy) into a network of the
:mod:`pyorb.model.mva` kind, and solves it for throughput and response time.

The stations every model is built from:

* **think** — a delay (infinite-server) station: the client's think time
  plus ``Calibration.client`` (its own stack and the loopback round trip).
* **GIL** — one single server for all Python CPU of the process: the
  servant's ``cpu`` and pyorb's per-call ``overhead``.  Threads do not add
  CPU capacity to Python code; work in C outside the GIL is not modelled.
* **delay** — a delay station for time a call spends blocked without CPU
  (``time.sleep``, blocking I/O, the sink of a middle tier).  Whether it
  also holds a thread or the event loop decides the model.

Where a strategy bounds the calls in service (``thread_pool(n)``,
``locality(n)``, ``thread_per_request(m)``, ``threaded``), the network is
not product-form: a thread is held across two stations (the GIL and the
blocking delay).  Those models use the flow-equivalent server (Norton)
decomposition that Harkema et al. use for ORBacus' thread pool: the
subnetwork {GIL, delay} is solved alone by exact MVA with k = 1..n calls
inside, its throughput X_sub(k) becomes the rate of one load-dependent
station (constant X_sub(n) beyond n calls: the others queue for a thread),
and that station is solved with the clients' think time as a
machine-repairman model.  The decomposition is exact for the sub-network's
mean throughput when the GIL is the only place calls queue inside the
pool; it ignores that pyorb's loop-side overhead runs before a call waits
for a thread (a few tens of microseconds a call, small against a delay
worth pooling for).

With a :class:`~pyorb.model.host.Host`, the clients (and a sink) on the
server's own cores join the network as single-server queues of their own,
and the cores' sharing stretches every process's CPU (:mod:`pyorb.model.host`).
"""

from __future__ import annotations

import ast
import dataclasses
import math
import statistics
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Iterable, Mapping

from pyorb.model import host as _host
from pyorb.model.host import Host
from pyorb.model.mva import Station, repairman

LOOP = frozenset({"reactive", "amh"})
"""Strategies that run synchronous servant code on the event-loop thread."""


@dataclass(frozen=True)
class Workload:
    """What the clients ask of the server."""

    clients: int
    """Concurrent requests/clients N (closed loop: each sends its next call after the reply)."""
    cpu: float
    """Servant CPU seconds per call (Python code: holds the GIL)."""
    delay: float = 0.0
    """Seconds per call that block without CPU (sleep, blocking I/O, a middle tier's sink)."""
    think: float = 0.0
    """Client think time between a reply and its next call, seconds."""

    def __post_init__(self) -> None:
        if self.clients < 0:
            raise ValueError(f"clients must be >= 0, got {self.clients}")
        for name in ("cpu", "delay", "think"):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be finite and >= 0, got {value}")

    @classmethod
    def from_stats(cls, stats: object, *, clients: int | None = None, think: float = 0.0,
                   operation: str | None = None, cpu_share: float = 1.0) -> Workload:
        """A workload from a server's statistics snapshot (``server.stats()``).

        Duck-typed: reads ``stats.operations`` (or ``stats.strategies``),
        each with ``name``, ``served``, ``in_flight`` and ``service.mean``.
        The service time of the busiest operation (or ``operation``) is split
        into CPU (``cpu_share`` of it) and blocking delay (the rest), since a
        snapshot cannot tell the two apart.  ``clients`` defaults to the
        calls in flight (at least 1).
        """
        rows = list(getattr(stats, "operations", ()) or getattr(stats, "strategies", ()))
        if operation is not None:
            rows = [r for r in rows if getattr(r, "name", None) == operation]
        rows = [r for r in rows if int(getattr(r, "served", 0)) > 0]
        if not rows:
            raise ValueError("the statistics hold no served calls" + (f" of {operation!r}" if operation else ""))
        served = sum(int(getattr(r, "served")) for r in rows)
        service = sum(int(getattr(r, "served")) * float(getattr(getattr(r, "service"), "mean")) for r in rows)
        mean = service / served
        in_flight = sum(int(getattr(r, "in_flight", 0)) for r in rows)
        share = min(1.0, max(0.0, cpu_share))
        return cls(clients if clients is not None else max(1, in_flight), mean * share, mean * (1 - share), think)


@dataclass(frozen=True)
class Cost:
    """What pyorb costs per call under one strategy."""

    overhead: float
    """CPU seconds per call in pyorb's request path (decode, dispatch, encode): holds the GIL."""
    handoff: float = 0.0
    """Seconds per call a thread waits to be woken and hand its reply back: holds the call's thread, not the GIL."""


@dataclass(frozen=True)
class Calibration:
    """pyorb's own costs on one machine.

    The defaults were measured on the 2-core machine of the benchmarks
    (``benchmarks/bench_strategies.py``, omniORBpy clients, each on its own
    connection, 2026-11-23; docs/benchmarks.md "Every model, echo and 1 ms
    of CPU"): ``overhead`` is the
    server's CPU per echo call at 64 clients, where the loop is busy and
    hand-offs batch; ``handoff`` is the extra latency per call at 1 client
    over the 64-client CPU (the thread's wake-up).  ``client`` is the echo
    round trip at 1 client minus the server's CPU (64.2 - 47.5 µs).
    ``forward`` is a middle tier's CPU for its own call to the sink, from
    the server CPU per call of the AMH middle tier in the client-scalability
    sweep (about 80 µs against 35 µs for an echo).  ``blocking_forward`` is
    the extra CPU when a synchronous middle tier blocks on that call through
    the loop (two more hand-offs; the thread-per-connection middle tier
    spent about 200 µs a call there).  On another machine, measure your own
    with :meth:`from_benchmark`.
    """

    reactive: Cost = Cost(40e-6)
    amh: Cost = Cost(35e-6)
    thread_pool: Cost = Cost(40e-6, 68e-6)
    thread_per_connection: Cost = Cost(67e-6, 28e-6)
    threaded: Cost = Cost(67e-6, 22e-6)
    locality: Cost = Cost(72e-6, 30e-6)
    thread_per_request: Cost = Cost(87e-6, 54e-6)
    """Without the thread's creation, which is ``thread_creation``."""
    thread_creation: float = 95e-6
    """CPU seconds to start and end a thread (thread_per_request)."""
    client: float = 17e-6
    """Seconds per call outside the server: the client's stack and the loopback round trip."""
    forward: float = 45e-6
    """A middle tier's CPU per call for its own request to the sink and the reply."""
    blocking_forward: float = 120e-6
    """Extra CPU per call when a synchronous middle tier waits for the sink through the loop."""
    cores: int = 2
    """CPU cores: the bound for several worker processes (amh-n); one GIL per process."""

    @classmethod
    def from_benchmark(cls, runs: Iterable[Mapping[str, Any]], cores: int | None = None) -> Calibration:
        """The calibration a run of ``benchmarks/bench_strategies.py --workloads echo --json FILE`` measured.

        ``runs`` are the file's ``"runs"``: per run a ``config`` (model, workload,
        clients), a ``result`` (``server_us``, ``latency_us``) and ``clean``.
        Each strategy's overhead is its median server CPU per echo call at the
        largest client count; its hand-off, the extra server CPU per call at
        the smallest count (the wake-ups that batch away under load); the
        client's share, the reactive round trip at the smallest count minus
        the server's CPU.  Strategies the runs lack keep the defaults, as do
        ``thread_creation`` (taken out of thread_per_request's overhead),
        ``forward`` and ``blocking_forward``.
        """
        samples: dict[tuple[str, int], list[tuple[float, float]]] = {}
        for run in runs:
            config, result = run.get("config", {}), run.get("result") or {}
            if not run.get("clean") or config.get("workload") != "echo" or "server_us" not in result:
                continue
            key = (str(config["model"]), int(config["clients"]))
            samples.setdefault(key, []).append((float(result["server_us"]) * 1e-6,
                                                float(result["latency_us"]) * 1e-6))
        base = cls() if cores is None else cls(cores=cores)
        changes: dict[str, Any] = {}
        for name in ("reactive", "amh", "thread_pool", "thread_per_connection", "threaded", "locality",
                     "thread_per_request"):
            counts = sorted(n for m, n in samples if m == name)
            if not counts:
                continue
            busy = statistics.median(cpu for cpu, _ in samples[name, counts[-1]])
            idle = statistics.median(cpu for cpu, _ in samples[name, counts[0]])
            overhead = busy - (base.thread_creation if name == "thread_per_request" else 0.0)
            handoff = 0.0 if name in LOOP else max(0.0, idle - busy)
            changes[name] = Cost(max(0.0, overhead), handoff)
        counts = sorted(n for m, n in samples if m == "reactive")
        if counts:
            changes["client"] = max(0.0, statistics.median(lat - cpu for cpu, lat in samples["reactive", counts[0]]))
        return dataclasses.replace(base, **changes)

    def cost(self, name: str) -> Cost:
        """The cost of strategy ``name`` (ValueError if it has none)."""
        value = getattr(self, name, None)
        if not isinstance(value, Cost):
            raise ValueError(f"no calibration for strategy {name!r}")
        return value


@dataclass(frozen=True)
class Prediction:
    """One strategy's predicted behaviour under one workload."""

    strategy: str
    threads: int
    """Dispatcher threads it holds (0 for the loop strategies)."""
    throughput: float
    """Calls/s."""
    response: float
    """Mean response time as a client sees it (without think time), s."""
    utilisation: float
    """Busy fraction of the GIL (of the loops, for amh-n)."""
    model: str = field(default="", compare=False)
    """The network, in a few words."""


def parse_spec(spec: str) -> tuple[str, tuple[int, ...]]:
    """``"thread_pool(8)"`` → ``("thread_pool", (8,))``; ``"amh-2"`` → ``("amh", (2,))`` (2 worker processes).

    Keyword arguments (``locality(4, threshold=2)``) are accepted and ignored:
    the model has no term for them.
    """
    text = spec.strip()
    if text.startswith("amh-") and text[4:].isdigit():
        return "amh", (int(text[4:]),)
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        raise ValueError(f"malformed strategy {spec!r}; expected e.g. 'thread_pool(8)'") from None
    if isinstance(node, ast.Name):
        return node.id, ()
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        args = tuple(a.value for a in node.args if isinstance(a, ast.Constant) and type(a.value) is int)
        if len(args) == len(node.args) and all(a > 0 for a in args):
            return node.func.id, args
    raise ValueError(f"malformed strategy {spec!r}; expected e.g. 'thread_pool(8)'")


def predict(spec: str, workload: Workload, calibration: Calibration | None = None, *, sync: bool = True,
            middle: bool = False, host: Host | None = None) -> Prediction:
    """The model of strategy ``spec`` under ``workload``.

    ``sync``: the servant method is synchronous (it blocks the thread that
    runs it, the loop's under ``reactive``/``amh``); otherwise it is a
    coroutine or AMH handler, which pyorb runs on the loop whatever the
    strategy, holding no thread while it waits.  ``middle``: the server is
    a middle tier whose ``delay`` is its call to a sink (adds
    ``Calibration.forward`` CPU per call, and ``blocking_forward`` for a
    synchronous one).  ``host``: the CPU the server shares with co-located
    clients (and a sink), see :mod:`pyorb.model.host`; ``None`` (or a host
    with nothing else on it) models the server alone.
    """
    there = None if host is None or host.server_only else host
    return _predict(spec, workload, calibration or DEFAULT, sync, middle, there)


DEFAULT = Calibration()


@lru_cache(maxsize=4096)
def _predict(spec: str, w: Workload, cal: Calibration, sync: bool, middle: bool, host: Host | None) -> Prediction:
    name, args = parse_spec(spec)
    # A plain servant under "amh" runs exactly as under "reactive": the AMH figure is for AMH servants.
    cost = cal.cost("reactive" if sync and name == "amh" else name)
    cpu = w.cpu + cost.overhead + (cal.forward if middle else 0.0)
    think = w.think + cal.client
    threads = _threads(name, args, w.clients)
    if not sync:  # coroutine/AMH servants: on the loop under every strategy, pyorb's loop-side cost
        loop = cal.cost("amh" if name == "amh" else "reactive")
        cpu = w.cpu + loop.overhead + (cal.forward if middle else 0.0)
        if name == "amh" and args:
            return _workers(spec, w, cpu, think, args[0], cal.cores, host=host)
        return _solve(spec, threads, w, think, w.delay, cpu, None, "GIL queue + async delay", host)
    if middle and name not in LOOP:
        cpu += cal.blocking_forward
    if name in LOOP:
        if args:  # amh-n: n loops, one per process, each blocked by the delay
            return _workers(spec, w, cpu + w.delay, think, args[0], cal.cores, blocked=w.delay, host=host)
        return _solve(spec, 0, w, think, 0.0, cpu + w.delay, None, "loop: one server for cpu + delay", host,
                      blocked=w.delay)
    held = cost.handoff + w.delay  # holds the thread, not the GIL
    if name == "thread_per_request":
        cpu += cal.thread_creation
    limit = {"thread_pool": args[0] if args else 8, "locality": args[0] if args else 8, "threaded": 1,
             "thread_per_request": args[0] if args else None}.get(name)
    bound = "no thread limit" if limit is None else f"at most {limit} in service"
    return _solve(spec, threads, w, think, held, cpu, limit, f"GIL queue + thread-held delay, {bound}", host)


def _threads(name: str, args: tuple[int, ...], clients: int) -> int:
    if name in LOOP:
        return 0
    if name in ("thread_pool", "locality"):
        return args[0] if args else 8
    if name == "thread_per_request":
        return min(clients, args[0]) if args else clients
    return clients  # one per connection (threaded too: per-connection threads under one lock)


def _solve(spec: str, threads: int, w: Workload, think: float, delay: float, cpu: float, limit: int | None,
           model: str, host: Host | None = None, blocked: float = 0.0) -> Prediction:
    """Clients with ``think`` in front of {GIL (cpu), delay}, at most ``limit`` calls inside.

    ``blocked``: the part of ``cpu`` that is a delay blocking the loop (not CPU: it does not stretch).
    """
    n = w.clients
    if host is not None:
        station = _pool_station(cpu - blocked, blocked, delay, limit, n)
        if limit is None:  # product form: the delay merges with the think time
            think += delay
        x = _host.throughput(n, think, station, cpu - blocked, 1, host)
        return _prediction(spec, threads, n, x, w.think, cpu, model + " + host CPU")
    if limit is None:  # product form: the delay merges with the think time
        x, _ = repairman(n, think + delay, _single(cpu))
        return _prediction(spec, threads, n, x, w.think, cpu, model)
    x_sub = _subnetwork(cpu, delay, min(limit, max(n, 1)))

    def rate(j: int) -> float:
        return x_sub[min(j, len(x_sub)) - 1]

    x, _ = repairman(n, think, rate)
    return _prediction(spec, threads, n, x, w.think, cpu, model)


def _pool_station(cpu: float, blocked: float, delay: float, limit: int | None, n: int) -> _host.ServerStation:
    """The server's station with its CPU stretched by s: a GIL queue, or the pool's flow-equivalent server."""

    def station(s: float) -> Station:
        if limit is None:
            return Station("GIL", cpu * s + blocked)
        x_sub = _subnetwork(cpu * s + blocked, delay, min(limit, max(n, 1)))
        return Station("pool", kind="rate", rate=lambda j: x_sub[min(j, len(x_sub)) - 1])

    return station


def _subnetwork(cpu: float, delay: float, k_max: int) -> list[float]:
    """X_sub(k) for k = 1..k_max calls in {one queue of demand cpu, a delay}: exact MVA."""
    out, queue = [], 0.0
    for k in range(1, k_max + 1):
        r = cpu * (1 + queue)
        x = k / (r + delay) if r + delay > 0 else math.inf
        queue = x * r
        out.append(x)
    return out


def _workers(spec: str, w: Workload, demand: float, think: float, n: int, cores: int,
             blocked: float = 0.0, host: Host | None = None) -> Prediction:
    """n worker processes, each with its own loop and connections (the kernel spreads clients evenly).

    More workers than cores share the cores: each gets cores/n of one, which
    stretches its CPU (``demand - blocked``), not its blocking delay.  On a
    ``host`` the workers are n processes among the others there (one
    n-server station; the host's slowdown replaces cores/n).
    """
    delay = 0.0 if blocked else w.delay
    model = f"{n} loops, one per process" + (", each blocked by the delay" if blocked else ", async delay")
    cpu = demand - blocked
    if host is not None:
        def station(s: float) -> Station:
            return Station("loops", cpu * s + blocked, kind="multi", servers=n)

        x = _host.throughput(w.clients, think + delay, station, cpu, n, host)
        return _prediction(spec, 0, w.clients, x, w.think, cpu / n, model + " + host CPU")
    slow = max(1.0, n / cores)
    per = cpu * slow + blocked
    x = 0.0
    for i in range(n):  # clients split as evenly as integers allow
        share = w.clients // n + (1 if i < w.clients % n else 0)
        x += repairman(share, think + delay, _single(per))[0]
    return _prediction(spec, 0, w.clients, x, w.think, cpu / max(1, min(n, cores)), model)


def _single(demand: float) -> Callable[[int], float]:
    rate = 1 / demand if demand > 0 else math.inf
    return lambda j: rate


def _prediction(spec: str, threads: int, n: int, x: float, think: float, cpu: float, model: str) -> Prediction:
    """``think`` here is the user's think time alone: the client's own stack counts in the response."""
    if n == 0:  # no calls: nothing to wait for
        return Prediction(spec, threads, 0.0, 0.0, 0.0, model)
    response = n / x - think if x > 0 else math.inf
    return Prediction(spec, threads, x, max(0.0, response), min(1.0, x * cpu) if cpu > 0 else 0.0, model)
