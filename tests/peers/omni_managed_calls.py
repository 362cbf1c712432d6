"""omniORBpy side of the servant-manager interop test: run by ``python -m pyorb.testing.omnipeer call``."""

from __future__ import annotations

from typing import Any


def call_each(orb: Any, _target: Any, refs: dict[str, str]) -> dict[str, Any]:
    """Per name: ``work(1)``'s result on the reference, or the repository id of what it raised.

    omniORB locates each reference (LocateRequest) before its first call, follows
    LOCATION_FORWARD, and narrows with ``_is_a``."""
    import Bench  # compiled by omnipeer from --idl

    outcomes: dict[str, Any] = {}
    for name, ior in refs.items():
        try:
            sink = orb.string_to_object(ior)._narrow(Bench.Sink)
            outcomes[name] = sink.work(1) if sink is not None else "narrow failed"
        except Exception as exc:  # noqa: BLE001 - the outcome is the result
            outcomes[name] = getattr(exc, "_NP_RepositoryId", type(exc).__name__)
    obj = orb.string_to_object(refs["missing"])
    outcomes["missing_non_existent"] = bool(obj._non_existent())
    return outcomes
