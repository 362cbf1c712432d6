"""omniORBpy side of benchmarks/fault_soak.py: run by ``python -m pyorb.testing.omnipeer call``.

``closed_loop(orb, sink, seconds, timeout_ms)`` calls ``sink.work(token)``
with a new token each time for ``seconds`` seconds, each call bounded by
omniORB's client call timeout, and returns what happened to the calls: ok,
failed by exception name, and replies that carried another call's token.
omniORB fails over to a group's other addresses only when it cannot
connect, so its calls fail while the first member is stalled or cut off.
"""

from __future__ import annotations

import time
from typing import Any


def closed_loop(orb: Any, sink: Any, seconds: float, timeout_ms: int) -> dict[str, Any]:
    import omniORB
    from omniORB import CORBA

    omniORB.setClientCallTimeout(sink, timeout_ms)
    ok = wrong = late = 0
    errors: dict[str, int] = {}
    token = 1 << 50
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        token += 1
        sent = time.monotonic()
        try:
            got = sink.work(token)
        except CORBA.SystemException as exc:
            name = f"{type(exc).__name__} {exc.completed}"
            errors[name] = errors.get(name, 0) + 1
            time.sleep(0.01)  # a refused connection fails at once: do not spin
        else:
            ok += 1
            wrong += got != token
        late += time.monotonic() - sent > timeout_ms / 1000 + 1.0
    return {"ok": ok, "errors": errors, "duplicates": wrong, "late": late}
