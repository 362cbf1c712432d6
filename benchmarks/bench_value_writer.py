"""Marshaling values: pyorb's value writer against omniORB's marshaler, in one process.

pyorb writes a body itself only when it holds a value inside a value's
state (omniORB's in-memory marshaler aborts on one); this measures what
writing every value body that way would cost.  For a sequence of
``--values`` small values (two longs and a short string), each repetition
times ``--calls`` marshals through ``BodyCodec.pack`` (omniORB, padding
zeroed) and through ``valuewriter.write_values``, alternating which goes
first; medians, min-max spreads and the ratio of the medians come from the
same run.  A chain of ``--values`` nodes (each inside the previous one's
state) is timed through the writer alone, which only it can write.

    python -m benchmarks.bench_value_writer --values 3000 --calls 20 --repeats 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]


def per_call(run: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        run()
    return (time.perf_counter() - start) / calls


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--values", type=int, default=3000)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    if not (0 < args.values <= 100_000 and 0 < args.calls <= 1000 and 1 < args.repeats <= 50):
        parser.error("--values 1..100000, --calls 1..1000, --repeats 2..50")

    import pyorb
    from pyorb.marshal.body import BodyCodec, _leaf
    from pyorb.marshal.valuewriter import write_values

    values = pyorb.load_idl(ROOT / "idl" / "values.idl").Values
    flat = ([values.Point(k, -k, f"p{k % 100}") for k in range(args.values)],)
    descs = (values._d_Points,)
    codec = BodyCodec(descs)
    chain = None
    for k in range(min(args.values, 400)):  # deeper chains meet omniORB's and Python's recursion limits
        chain = values.Node(k, chain)
    omni = lambda: codec.pack(flat, 0, True)  # noqa: E731
    writer = lambda: write_values(descs, flat, 0, True, _leaf)  # noqa: E731
    nested = lambda: write_values((values._d_Node,), (chain,), 0, True, _leaf)  # noqa: E731
    assert len(codec.unpack(writer(), 0, True)[0]) == args.values  # (omniORB cuts chunks elsewhere)
    times: dict[str, list[float]] = {"omniORB": [], "pyorb writer": [], "pyorb writer, chain": []}
    for rep in range(args.repeats):
        order = [("omniORB", omni), ("pyorb writer", writer)]
        for name, run in order if rep % 2 == 0 else order[::-1]:
            times[name].append(per_call(run, args.calls))
        times["pyorb writer, chain"].append(per_call(nested, args.calls))
    base = statistics.median(times["omniORB"])
    print(f"{args.values} values, {args.calls} calls x {args.repeats} repeats (chain: "
          f"{min(args.values, 400)} nodes)")
    print(f"{'marshal':<22} {'median ms':>10} {'min-max ms':>16} {'vs omniORB':>11}")
    for name, got in times.items():
        med = statistics.median(got)
        ratio = f"{med / base:.2f}" if name != "pyorb writer, chain" else "-"
        print(f"{name:<22} {med * 1e3:>10.2f} {min(got) * 1e3:>7.2f}-{max(got) * 1e3:<8.2f} {ratio:>11}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
