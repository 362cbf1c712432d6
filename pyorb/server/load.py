"""Requests in flight, per connection and per server, and what the limits do.

At a limit the server stops *reading* (the requests already accepted all
run and are answered); it reads again when enough of them finish.  A draining
connection (graceful shutdown, idle timeout) is closed with CloseConnection
once its last request is answered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyorb.config import Config
    from pyorb.server.connection import ServerConnection

LOAD = "requests in flight"


class ServerLoad:
    """Counts requests started and finished, both on the event-loop thread
    (replies from dispatcher threads are settled there), so without locks."""

    def __init__(self, config: Config, connections: set[ServerConnection]) -> None:
        self._connections = connections
        self.total = 0
        self.max_total = config.max_requests
        self.max_per_connection = config.max_requests_per_connection
        self.held: set[ServerConnection] = set()

    # The counting itself is inlined in ServerConnection (request start and
    # end run for every request); these are the rare paths.
    def full(self, conn: ServerConnection) -> None:
        """A limit is reached: stop reading ``conn``, or every connection."""
        if self.total >= self.max_total:
            for other in self._connections:
                self.held.add(other)
                other.reading.hold(LOAD)
        else:
            self.held.add(conn)
            conn.reading.hold(LOAD)

    def wake(self, conn: ServerConnection) -> None:
        """A request of ``conn`` ended while connections are held or ``conn`` drains."""
        for held in list(self.held):
            if held.in_flight < self.max_per_connection and self.total < self.max_total:
                self.held.discard(held)
                held.reading.release(LOAD)
        if conn.draining and conn.in_flight == 0:
            conn.close_idle()

    def forget(self, conn: ServerConnection) -> None:
        self.held.discard(conn)
