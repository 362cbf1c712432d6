"""The load generators' one result type and its JSON line (no process, no socket)."""

from __future__ import annotations

import json
import math

import pytest

from pyorb.loadtest.stats import LATENCY_KEYS, LoadResult, read_result


def test_a_result_survives_its_json_line_with_its_extras_and_no_calls_as_null() -> None:
    timed = LoadResult.measured("pipelined", 1, 3, 1, 2.0, [0.001, 0.002, 0.004], 0.5, 3.0, window=64, target="echo")
    empty = LoadResult.measured("smi", 4, 0, 2, 1.0, [], 0.1, 1.5)
    for result in (timed, empty):
        line = json.dumps(result.as_dict())
        back = read_result(f"ready\n{line}\n")
        assert (back.mode, back.clients, back.calls, back.errors, back.seconds) == \
            (result.mode, result.clients, result.calls, result.errors, result.seconds)
        assert back.extra == result.extra and back.throughput == result.throughput
        for key in LATENCY_KEYS:
            assert back.latency_ms[key] == result.latency_ms[key] or \
                (math.isnan(back.latency_ms[key]) and math.isnan(result.latency_ms[key]))
    assert timed.throughput == 1.5 and timed.latency_ms["p50_ms"] == 2.0 and timed.latency_ms["min_ms"] == 1.0
    assert json.loads(json.dumps(empty.as_dict()))["p99_ms"] is None  # NaN is not JSON


def test_read_result_takes_the_last_json_line_and_says_when_there_is_none() -> None:
    first = LoadResult.measured("closed", 1, 1, 0, 1.0, [0.001], 0.0, 1.0)
    last = LoadResult.measured("closed", 2, 5, 0, 1.0, [0.001], 0.0, 1.0)
    out = f"{json.dumps(first.as_dict())}\nnoise\n{json.dumps(last.as_dict())}\n{{broken\n".encode()
    assert read_result(out).clients == 2
    with pytest.raises(ValueError, match="printed no result line; its output ended: 'Traceback"):
        read_result("Traceback (most recent call last):\n")
    with pytest.raises(ValueError, match="lacks calls, errors"):
        read_result('{"mode": "smi", "clients": 1, "seconds": 1.0}\n')
