"""Requests in flight, per connection and per server, and what the limits do.

At a limit the server stops *reading* (the requests already accepted all
run and are answered); it reads again when enough of them finish.  A draining
connection (graceful shutdown, idle timeout) is closed with CloseConnection
once its last request is answered.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyorb.config import Config
    from pyorb.server.connection import ServerConnection

LOAD = "requests in flight"


class ServerLoad:
    """Counts requests started and finished; ``finished`` may run on any thread."""

    def __init__(self, config: Config, connections: set[ServerConnection]) -> None:
        self._connections = connections
        self._lock = threading.Lock()
        self.total = 0
        self.max_total = config.max_requests
        self.max_per_connection = config.max_requests_per_connection
        self.held: set[ServerConnection] = set()

    def started(self, conn: ServerConnection) -> None:
        """A request of ``conn`` was accepted (loop thread)."""
        with self._lock:
            conn.in_flight += 1
            self.total += 1
            server_full = self.total >= self.max_total
        if server_full:  # no connection may take another request now
            for other in self._connections:
                self.held.add(other)
                other.reading.hold(LOAD)
        elif conn.in_flight >= self.max_per_connection:
            self.held.add(conn)
            conn.reading.hold(LOAD)

    def finished(self, conn: ServerConnection) -> None:
        with self._lock:
            conn.in_flight -= 1
            self.total -= 1
            wake = bool(self.held) or (conn.draining and conn.in_flight == 0)
        if wake:
            if threading.get_ident() == conn.loop_thread:
                self._wake(conn)
            else:
                try:
                    conn.loop.call_soon_threadsafe(self._wake, conn)
                except RuntimeError:  # the loop has closed: nothing left to wake
                    pass

    def _wake(self, conn: ServerConnection) -> None:
        for held in list(self.held):
            if held.in_flight < self.max_per_connection and self.total < self.max_total:
                self.held.discard(held)
                held.reading.release(LOAD)
        if conn.draining and conn.in_flight == 0:
            conn.close_idle()

    def forget(self, conn: ServerConnection) -> None:
        self.held.discard(conn)
