"""What the server holds for its clients, and what the limits do.

Requests in flight, per connection and per server: at a limit the server
stops *reading* (the requests already accepted all run and are answered); it
reads again when enough of them finish.  A draining connection (graceful
shutdown, idle timeout) is closed with CloseConnection once its last request
is answered.

Memory held for peers, server-wide: output that peers do not read and
unfinished fragment trains.  Each has a budget; past it the connection that
holds the most is dropped, which is the one misbehaving whenever one is.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, AbstractSet, Any

if TYPE_CHECKING:
    from pyorb.config import Config
    from pyorb.server.connection import ServerConnection

log = logging.getLogger(__name__)

LOAD = "requests in flight"
REFUSAL_LOG_PERIOD = 10.0
"""Seconds between two log lines about refused connections."""


class ServerLoad:
    """Counts requests started and finished, both on the event-loop thread
    (replies from dispatcher threads are settled there), so without locks."""

    def __init__(self, config: Config, connections: AbstractSet[ServerConnection]) -> None:
        self._connections = connections
        self.total = 0
        self.max_total = config.max_requests
        self.max_per_connection = config.max_requests_per_connection
        self.held: set[ServerConnection] = set()
        self.max_output = config.max_output_buffer
        self.max_reassembly = config.max_reassembly_buffer
        self.output_paused_conns: set[ServerConnection] = set()
        self.reassembly = 0
        self.refusals = 0  # since the last log line about them
        self.tls_refused = 0  # TLS handshakes that failed or timed out, since the start
        self._refusal_logged = float("-inf")
        self.max_connections = config.max_connections  # the server fits it to the descriptor limit

    def started(self, conn: ServerConnection) -> None:
        """A request of ``conn`` starts: count it, and stop reading at a limit."""
        conn.in_flight += 1
        self.total += 1
        if conn.in_flight >= self.max_per_connection or self.total >= self.max_total:
            self.full(conn)

    def finished(self, conn: ServerConnection) -> None:
        """A request of ``conn`` is over (replied, cancelled or dropped)."""
        conn.in_flight -= 1
        self.total -= 1
        if self.held or conn.draining:
            self.wake(conn)

    def full(self, conn: ServerConnection) -> None:
        """A limit is reached: stop reading ``conn``, or every connection."""
        if self.total >= self.max_total:
            for other in self._connections:
                self.held.add(other)
                other.hold_reading(LOAD)
        else:
            self.held.add(conn)
            conn.hold_reading(LOAD)

    def wake(self, conn: ServerConnection) -> None:
        """A request of ``conn`` ended while connections are held or ``conn`` drains."""
        for held in list(self.held):
            if held.in_flight < self.max_per_connection and self.total < self.max_total:
                self.held.discard(held)
                held.release_reading(LOAD)
        if conn.draining and conn.settled:
            conn.close_idle()

    def forget(self, conn: ServerConnection) -> None:
        self.held.discard(conn)
        self.output_paused_conns.discard(conn)

    # -- memory held for peers -------------------------------------------------
    # Only a paused connection holds more than write_buffer_limit, so the
    # output budget counts those alone, and only when one of them grows.
    def output_paused(self, conn: ServerConnection) -> None:
        self.output_paused_conns.add(conn)
        self.output_grew()

    def output_resumed(self, conn: ServerConnection) -> None:
        self.output_paused_conns.discard(conn)

    def output_grew(self) -> None:
        sizes = {c: c.buffered_output() for c in self.output_paused_conns}
        total = sum(sizes.values())
        while total > self.max_output and sizes:
            worst = max(sizes, key=sizes.__getitem__)
            log.warning("aborting connection %s: %d bytes of output unread, %d held for all peers "
                        "(max_output_buffer %d)", worst.peer, sizes[worst], total, self.max_output)
            total -= sizes.pop(worst)
            self.output_paused_conns.discard(worst)
            worst.abort()

    def reassembly_changed(self, conn: ServerConnection, delta: int) -> None:
        self.reassembly += delta
        if delta > 0 and self.reassembly > self.max_reassembly:
            worst = max(self._connections, key=lambda c: c.reassembly_bytes, default=conn)
            worst.drop(f"{worst.reassembly_bytes} bytes of unfinished fragmented messages, {self.reassembly} "
                       f"for all peers (max_reassembly_buffer {self.max_reassembly})")

    # -- refused connections -----------------------------------------------------
    def refused(self, peer: Any) -> None:
        """Log a refused connection, at most one line per REFUSAL_LOG_PERIOD."""
        self.refusals += 1
        now = time.monotonic()
        if now - self._refusal_logged >= REFUSAL_LOG_PERIOD:
            log.warning("refusing connections (%d open, max_connections %d): %d refused since the last report, "
                        "latest from %s", len(self._connections), self.max_connections, self.refusals, peer)
            self.refusals = 0
            self._refusal_logged = now
