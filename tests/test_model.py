"""pyorb.model: the MVA solvers against closed forms, the strategy models, recommend()."""

from __future__ import annotations

import math
import time

import pytest

from pyorb.model import Calibration, Host, Station, Workload, predict, recommend, repairman, solve
from pyorb.model import host as host_model
from pyorb.model.strategies import parse_spec
from pyorb.server.call.stats import RecorderSnapshot, ServerStats, Timing


def repairman_closed_form(n: int, demand: float, think: float) -> float:
    """X(N) of one exponential server with N machines thinking Z: (1 - p0) / D."""
    rho = demand / think
    terms = [math.factorial(n) / math.factorial(n - k) * rho**k for k in range(n + 1)]
    return (1 - 1 / sum(terms)) / demand


@pytest.mark.parametrize("n", [1, 2, 5, 10, 40])
def test_mva_matches_the_machine_repairman_closed_form(n: int) -> None:
    expected = repairman_closed_form(n, 0.01, 0.1)
    point = solve([Station("cpu", 0.01)], n, think=0.1)[-1]
    assert point.throughput == pytest.approx(expected, rel=1e-9)
    assert point.response == pytest.approx(n / expected - 0.1, rel=1e-9)  # Little's law
    assert repairman(n, 0.1, lambda j: 100.0)[0] == pytest.approx(expected, rel=1e-9)


def test_one_queue_without_think_time_saturates_at_once() -> None:
    for point in solve([Station("cpu", 0.004)], 8):
        assert point.throughput == pytest.approx(250.0)
        assert point.response == pytest.approx(point.clients * 0.004)
        assert point.stations[0].utilisation == pytest.approx(1.0)


def test_two_stations_by_hand() -> None:
    # D1 = 0.1, D2 = 0.05, Z = 0.  N=1: R = .1 + .05, X = 1/.15, Q1 = 2/3, Q2 = 1/3.
    # N=2: R1 = .1 * (1 + 2/3) = 1/6, R2 = .05 * (1 + 1/3) = 1/15, X = 2 / (1/6 + 1/15) = 60/7.
    points = solve([Station("a", 0.1), Station("b", 0.05)], 2)
    assert points[0].throughput == pytest.approx(1 / 0.15)
    assert points[1].throughput == pytest.approx(60 / 7)
    assert points[1].stations[0].response == pytest.approx(1 / 6)
    assert points[1].stations[1].queue == pytest.approx(60 / 7 / 15)
    assert points[1].stations[0].utilisation == pytest.approx(6 / 7)


def test_throughput_respects_the_asymptotic_bounds() -> None:
    stations = [Station("a", 0.02), Station("b", 0.005), Station("sleep", 0.03, "delay")]
    think = 0.05
    for point in solve(stations, 60, think=think):
        bound = min(point.clients / (0.02 + 0.005 + 0.03 + think), 1 / 0.02)
        assert point.throughput <= bound * (1 + 1e-12)
    assert solve(stations, 200, think=think)[-1].throughput == pytest.approx(50.0, rel=1e-3)


def test_a_multi_server_station_beats_its_servers_split_and_ends_at_c_over_d() -> None:
    c, demand, think = 4, 0.05, 0.1
    multi = solve([Station("m", demand, "multi", servers=c)], 40, think=think)
    for n in (4, 8, 20, 40):
        split = c * solve([Station("one", demand)], n // c, think=think)[-1].throughput
        assert multi[n - 1].throughput >= split - 1e-9  # pooling never loses
        assert repairman(n, think, lambda j: min(j, c) / demand)[0] == pytest.approx(multi[n - 1].throughput)
    # Never more jobs than servers: no queueing at all.
    assert multi[c - 1].throughput == pytest.approx(c / (demand + think))
    assert multi[-1].throughput == pytest.approx(c / demand, rel=1e-3)
    one = solve([Station("m", demand, "multi", servers=1)], 10, think=think)
    assert [p.throughput for p in one] == pytest.approx([p.throughput for p in solve([Station("q", demand)], 10,
                                                                                           think=think)])


def test_bad_stations_are_refused() -> None:
    with pytest.raises(ValueError, match="demand"):
        Station("x", -1.0)
    with pytest.raises(ValueError, match="servers"):
        Station("x", 1.0, "multi", servers=0)
    with pytest.raises(ValueError, match="clients"):
        Workload(clients=-1, cpu=0.0)


def test_a_thread_pool_caps_a_blocking_workload_at_n_over_the_delay() -> None:
    # 8 threads, each call sleeping 50 ms: at most 8 / 0.05 = 160 calls/s, as Harkema's TPR-8 measured.
    p = predict("thread_pool(8)", Workload(clients=128, cpu=0.0, delay=0.05))
    assert p.throughput == pytest.approx(8 / (0.05 + Calibration().thread_pool.handoff + 40e-6), rel=0.02)
    # thread per connection has no limit: 128 clients overlap their sleeps.
    assert predict("thread_per_connection", Workload(clients=128, cpu=0.0, delay=0.05)).throughput > 2000


def test_the_loop_serialises_a_blocking_delay_but_not_an_async_one() -> None:
    w = Workload(clients=100, cpu=0.0001, delay=0.01)
    blocked = predict("reactive", w, sync=True)
    assert blocked.throughput == pytest.approx(1 / (0.0101 + Calibration().reactive.overhead), rel=0.01)
    assert predict("amh", w, sync=False).throughput > 50 * blocked.throughput


def test_amh_workers_scale_with_cores_only() -> None:
    w = Workload(clients=64, cpu=0.001)
    one, two, four = (predict(s, w, sync=False).throughput for s in ("amh", "amh-2", "amh-4"))
    assert two == pytest.approx(2 * one, rel=0.01)
    assert four == pytest.approx(two, rel=0.01)  # 2 cores: the extra processes share them


def test_recommend_picks_a_thread_pool_for_a_blocking_delay() -> None:
    rec = recommend(Workload(clients=64, cpu=0.0002, delay=0.02))
    assert parse_spec(rec.strategy)[0] == "thread_pool"
    assert 16 <= rec.threads <= 64
    assert rec.throughput > 10 * predict("reactive", Workload(64, 0.0002, 0.02)).throughput
    assert "blocks its thread" in rec.reason
    assert rec.predictions[0].throughput >= rec.throughput


def test_recommend_picks_reactive_for_tiny_cpu_work() -> None:
    rec = recommend(Workload(clients=32, cpu=20e-6))
    assert (rec.strategy, rec.threads) == ("reactive", 0)
    assert rec.throughput == pytest.approx(1 / 60e-6, rel=0.01)


def test_recommend_picks_amh_for_async_delays() -> None:
    rec = recommend(Workload(clients=500, cpu=50e-6, delay=0.05), sync=False)
    assert (rec.strategy, rec.threads) == ("amh", 0)
    assert rec.throughput == pytest.approx(500 / (0.05 + 85e-6 + 17e-6), rel=0.05)


def test_recommend_takes_a_list_of_strategies() -> None:
    rec = recommend(Workload(8, 0.001, 0.01), strategies=["threaded", "thread_pool(2)"])
    assert rec.strategy == "thread_pool(2)" and len(rec.predictions) == 2
    for bad in ("thread_pool(x", "thread_pool(x)", "thread_pool(0)", "1 + 2"):
        with pytest.raises(ValueError, match="malformed"):
            recommend(Workload(8, 0.001), strategies=[bad])
    assert parse_spec(" locality(4, threshold=2) ") == ("locality", (4,))
    assert parse_spec("amh-3") == ("amh", (3,))


def test_recommend_is_fast_enough_to_call_at_run_time() -> None:
    best = math.inf
    for clients in range(990, 1000):  # distinct workloads: no cache hits
        start = time.perf_counter()
        recommend(Workload(clients=clients, cpu=0.0005, delay=0.03))
        best = min(best, time.perf_counter() - start)
    # About 0.8 ms on a quiet 2-core machine; the bound is an order of magnitude above it so that a
    # loaded machine cannot fail it, and still far below the seconds between the adaptive strategy's looks.
    assert best < 20e-3


def test_a_workload_from_server_statistics() -> None:
    op = RecorderSnapshot("work", served=100, in_flight=12, failed=0, dropped=0, wait=Timing(),
                          service=Timing(mean=0.004))
    idle = RecorderSnapshot("ping", served=0, in_flight=0, failed=0, dropped=0, wait=Timing(), service=Timing())
    w = Workload.from_stats(ServerStats(operations=(op, idle)), cpu_share=0.25)
    assert (w.clients, w.cpu, w.delay) == (12, pytest.approx(0.001), pytest.approx(0.003))
    assert Workload.from_stats(ServerStats(operations=(op,)), clients=50).clients == 50
    with pytest.raises(ValueError, match="no served calls"):
        Workload.from_stats(ServerStats(operations=(idle,)))


def test_a_calibration_from_the_strategy_benchmark() -> None:
    def run(model: str, clients: int, server_us: float, latency_us: float, clean: bool = True) -> dict[str, object]:
        return {"config": {"model": model, "workload": "echo", "clients": clients}, "clean": clean,
                "result": {"server_us": server_us, "latency_us": latency_us}}

    runs = [run("reactive", 1, 50.0, 70.0), run("reactive", 64, 41.0, 2600.0), run("reactive", 64, 39.0, 2700.0),
            run("thread_pool", 1, 110.0, 130.0), run("thread_pool", 64, 40.0, 3400.0),
            run("thread_per_request", 64, 200.0, 9000.0), run("threaded", 64, 1.0, 1.0, clean=False),
            {"config": {"model": "amh", "workload": "cpu", "clients": 64}, "clean": True,
             "result": {"server_us": 1035.0, "latency_us": 1.0}}]
    cal = Calibration.from_benchmark(runs, cores=4)
    assert cal.reactive.overhead == pytest.approx(40e-6) and cal.reactive.handoff == 0.0
    assert (cal.thread_pool.overhead, cal.thread_pool.handoff) == (pytest.approx(40e-6), pytest.approx(70e-6))
    assert cal.thread_per_request.overhead == pytest.approx(200e-6 - cal.thread_creation)
    assert cal.client == pytest.approx(20e-6)
    assert cal.threaded == Calibration().threaded and cal.amh == Calibration().amh  # unclean / not echo: defaults
    assert cal.cores == 4


SERVER_MODELS = [("reactive", True, False), ("amh", False, True), ("amh-2", False, True),
                 ("thread_pool(8)", True, False), ("thread_per_connection", True, True),
                 ("thread_per_request", True, False), ("threaded", True, False)]


@pytest.mark.parametrize("spec, sync, middle", SERVER_MODELS)
def test_a_host_with_nothing_else_on_it_is_the_server_only_model(spec: str, sync: bool, middle: bool) -> None:
    w = Workload(clients=40, cpu=0.0005, delay=0.01)
    alone = predict(spec, w, sync=sync, middle=middle)
    assert predict(spec, w, sync=sync, middle=middle, host=Host()) == alone
    assert predict(spec, w, sync=sync, middle=middle, host=Host(cores=8, client=0.0, sink=0.0)) == alone
    # Clients on the same cores can only take CPU from the server.
    shared = predict(spec, w, sync=sync, middle=middle, host=Host(cores=2, client=60e-6, sink=40e-6))
    assert shared.throughput <= alone.throughput * (1 + 1e-9)


def test_the_host_model_by_hand() -> None:
    def gil(s: float) -> Station:
        return Station("GIL", 1e-3 * s)

    # Two processes (server 1 ms, generator 0.5 ms a call) on two cores never contend: exact MVA of two
    # queues.  N=1: X = 1/1.5 ms, Q = (2/3, 1/3); N=2: R = 1 ms (1 + 2/3) + 0.5 ms (1 + 1/3), X = 2 / R = 6000/7.
    assert host_model.throughput(2, 0.0, gil, 1e-3, 1, Host(2, client=0.5e-3)) == pytest.approx(6000 / 7)
    # One call is in one place at a time: no slowdown at N = 1 whatever the cores.
    assert host_model.throughput(1, 0.0, gil, 1e-3, 1, Host(1, client=0.5e-3, sink=0.25e-3)) == pytest.approx(
        1 / 1.75e-3)
    # Three processes each runnable half the time on two cores: each finds both others runnable with
    # probability 1/4 and then gets 2/3 of a core: slowdown 1 + 1/4 * (3/2 - 1) = 1.125.
    assert host_model.slowdowns([0.5, 0.5, 0.5], 2) == pytest.approx([1.125] * 3)
    assert host_model.slowdowns([1.0, 1.0], 1, background=1.0) == pytest.approx([3.0, 3.0])
    # Saturated on one core: the server and the generator split it, X -> 1 / (1 ms + 1 ms).
    assert host_model.throughput(200, 0.0, gil, 1e-3, 1, Host(1, client=1e-3)) == pytest.approx(500, rel=0.01)


def test_the_host_takes_the_cores_the_extra_workers_wanted() -> None:
    w = Workload(clients=150, cpu=0.0, delay=0.0)
    alone = predict("amh-2", w, sync=False, middle=True).throughput
    host = Host(cores=2, client=55e-6, sink=40e-6)
    shared = predict("amh-2", w, sync=False, middle=True, host=host).throughput
    cal = Calibration()
    per_call = cal.amh.overhead + cal.forward + host.client + host.sink
    assert shared < alone and shared <= 2 / per_call * 1.001  # the 2 cores serve all four processes
    with pytest.raises(ValueError, match="cores"):
        Host(cores=0)
    with pytest.raises(ValueError, match="client"):
        Host(client=-1.0)
