"""omniORBpy halves of tests/test_deadlines.py: a client with a call timeout, a Bench::Sink servant.

Run through ``python -m pyorb.testing.omnipeer`` (omniORB only, never pyorb).
"""

from __future__ import annotations

from typing import Any

import omniORB


def timed_work(orb: Any, obj: Any, timeout_ms: int, token: int) -> int:
    """``obj.work(token)`` with omniORB's own call timeout on the reference."""
    omniORB.setClientCallTimeout(obj, timeout_ms)
    return int(obj.work(token))


def _sink_class() -> Any:
    import Bench__POA  # type: ignore[import-not-found]  # compiled by omnipeer from --idl

    class Sink(Bench__POA.Sink):  # type: ignore[misc]
        def work(self, token: int) -> int:
            return token

    return Sink


def Sink() -> Any:
    """An omniORBpy servant whose work(token) returns the token."""
    return _sink_class()()
