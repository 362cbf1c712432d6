"""Test support: driving pyorb from blocking code, peer processes, the pytest plugin.

* :mod:`pyorb.testing.loop`: :class:`LoopThread` (an event loop in a
  background thread) and :class:`SyncProxy` (a pyorb proxy called from
  blocking code through it).
* :mod:`pyorb.testing.kit`: server, sink, omniORBpy and omniNames processes
  for tests (:class:`ServerProcess`, :class:`NameServer`, ...).
* :mod:`pyorb.testing.omnipeer`: ``python -m pyorb.testing.omnipeer``, an
  omniORBpy process serving or calling user code.
* :mod:`pyorb.testing.groupload`: closed-loop calls through an object
  group that account for every call (ok, failed, lost, answered twice).
* :mod:`pyorb.testing.toxiproxy`: a toxiproxy server on loopback, its
  proxies and their faults (latency, bandwidth, resets, stalls).
* :mod:`pyorb.testing.memory`: :func:`memory_pair`, a client and server
  joined by in-memory transports (no sockets).
* :mod:`pyorb.testing.waiting`: :func:`wait_until` (and its blocking twin),
  polling a condition with a time bound.
* :mod:`pyorb.testing.plugin`: the pytest plugin (entry point ``pyorb``).

Nothing in the library imports this package.  Importing it is cheap: the
names below load their modules (and omniORB) on first use, so the pytest
plugin can be imported by every test run without starting anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyorb._lazy import lazy_names

if TYPE_CHECKING:
    from pyorb.testing.kit import NameServer as NameServer
    from pyorb.testing.kit import PeerProcessError as PeerProcessError
    from pyorb.testing.kit import RunningServer as RunningServer
    from pyorb.testing.kit import ServerProcess as ServerProcess
    from pyorb.testing.kit import free_port as free_port
    from pyorb.testing.loop import LoopThread as LoopThread
    from pyorb.testing.loop import SyncProxy as SyncProxy
    from pyorb.testing.loop import new_event_loop as new_event_loop
    from pyorb.testing.memory import memory_pair as memory_pair
    from pyorb.testing.waiting import wait_until as wait_until
    from pyorb.testing.waiting import wait_until_blocking as wait_until_blocking

_EXPORTS = {
    "LoopThread": "pyorb.testing.loop",
    "SyncProxy": "pyorb.testing.loop",
    "new_event_loop": "pyorb.testing.loop",
    "NameServer": "pyorb.testing.kit",
    "PeerProcessError": "pyorb.testing.kit",
    "RunningServer": "pyorb.testing.kit",
    "ServerProcess": "pyorb.testing.kit",
    "free_port": "pyorb.testing.kit",
    "memory_pair": "pyorb.testing.memory",
    "wait_until": "pyorb.testing.waiting",
    "wait_until_blocking": "pyorb.testing.waiting",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_names(__name__, _EXPORTS)
