"""Configuration: one frozen, validated dataclass passed down explicitly."""

from __future__ import annotations

from dataclasses import dataclass

from pyorb.marshal.layout import Bounds
from pyorb.giop.messages import GIOP_1_2, SUPPORTED_VERSIONS, Version

MiB = 1024 * 1024


@dataclass(frozen=True)
class Config:
    """Settings shared by pyorb servers and clients.

    Every limit has a default that suits a middle tier; all are checked here
    so that a bad value fails at construction, not under load.
    """

    max_message_size: int = 64 * MiB
    """Largest GIOP message accepted or sent (a reassembled fragment train counts whole)."""
    max_fragment_trains: int = 32
    """Fragmented messages that may be in reassembly at once on one connection."""
    max_fragment_size: int | None = None
    """GIOP 1.2 Requests and Replies longer than this many octets are sent as fragments of at most this size
    (a multiple of 8, at least 64); None sends every message whole."""
    read_timeout: float = 30.0
    """Seconds a partly received message (or fragment train) may stall before the connection is dropped."""
    call_timeout: float | None = None
    """Default per-call timeout of the client in seconds (None: wait for the reply or a connection failure)."""
    connect_timeout: float = 10.0
    """Seconds the client waits for a TCP connection before raising TRANSIENT."""
    tls_handshake_timeout: float = 10.0
    """Seconds a TLS handshake may take, on either side, before the connection is dropped (client: TRANSIENT)."""
    giop_version: Version = GIOP_1_2
    """Highest GIOP version the client speaks (the IOR's profile may lower it)."""
    little_endian: bool = True
    """Byte order of the messages the client sends (servers answer in the request's order)."""
    max_forwards: int = 8
    """LOCATION_FORWARD hops a client follows for one call before giving up with TRANSIENT."""
    max_pending_calls: int = 100_000
    """Calls one client connection may have awaiting replies; beyond it a call fails at once with IMP_LIMIT."""
    max_connections: int = 10_000
    """Client connections a server keeps; a connection beyond it gets CloseConnection (its client retries)."""
    max_requests_per_connection: int = 10_000
    """Requests of one connection in servant code or queued; at the limit the server stops reading it."""
    max_requests: int = 100_000
    """Requests in servant code or queued across the server; at the limit it stops reading every connection until they drain."""
    write_buffer_limit: int = 1 * MiB
    """Output buffered for one connection beyond which the server stops reading its requests until it drains."""
    write_timeout: float = 30.0
    """Seconds a connection may leave output past ``write_buffer_limit`` unread before it is aborted."""
    max_output_buffer: int = 256 * MiB
    """Output buffered for peers that do not read, server-wide; beyond it the connection holding most is aborted."""
    max_reassembly_buffer: int = 256 * MiB
    """Bytes of unfinished fragment trains, server-wide; beyond it the connection holding most is dropped."""
    idle_timeout: float | None = 180.0
    """Seconds a server connection with nothing in flight may stay silent before CloseConnection (None: never)."""
    max_nesting_depth: int = 64
    """Received any values nested in any values (and values of a recursive type, IDL's or a received TypeCode's, in themselves), and TypeCodes in TypeCodes, beyond which the body gets MARSHAL."""
    max_typecode_size: int = 64 * 1024
    """Octets of one received TypeCode beyond which the body gets MARSHAL."""
    max_empty_elements: int = 65536
    """Elements of types that take no octets (sequence<null> or array<null, N> in an any) in one received body, all sequences and arrays together, beyond which the body gets MARSHAL."""
    propagate_deadlines: bool = True
    """A client call made from servant code takes the remaining time of the request being served as its timeout (its own ``timeout=`` or ``call_timeout`` wins if smaller), as gRPC passes deadlines on (False: only its own)."""
    direct_replies: bool = True
    """A dispatcher thread writes its reply to a plain TCP socket itself when the connection's output is idle and no batch of replies is on its way to the loop (False: every reply goes through the event loop)."""
    queue_target: float | None = None
    """Admission control (CoDel): once every call for ``queue_interval`` seconds waited longer than this many seconds for its strategy, calls that would wait longer are answered TRANSIENT (completed NO) at once; None: never shed.  Per operation: ``Server.activate(admission=...)``."""
    queue_interval: float = 0.1
    """Seconds the queue's wait must stay above ``queue_target`` before the server sheds calls."""
    queue_limit: float | None = None
    """Seconds a call may wait to start (in its socket while the event loop is behind, then for a thread) before it
    is answered TRANSIENT (completed NO), whatever the load; None: no bound."""

    def __post_init__(self) -> None:
        if self.max_message_size < 1024:
            raise ValueError(f"max_message_size must be at least 1024 bytes, got {self.max_message_size}")
        if self.max_fragment_size is not None and (self.max_fragment_size < 64 or self.max_fragment_size % 8):
            raise ValueError(f"max_fragment_size must be a multiple of 8, at least 64, got {self.max_fragment_size}")
        if self.max_fragment_trains < 1:
            raise ValueError(f"max_fragment_trains must be at least 1, got {self.max_fragment_trains}")
        for name in ("read_timeout", "connect_timeout", "tls_handshake_timeout", "write_timeout"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.call_timeout is not None and self.call_timeout <= 0:
            raise ValueError(f"call_timeout must be positive or None, got {self.call_timeout}")
        if self.giop_version not in SUPPORTED_VERSIONS:
            raise ValueError(f"giop_version must be one of {SUPPORTED_VERSIONS}, got {self.giop_version}")
        for name in ("max_pending_calls", "max_connections", "max_requests_per_connection", "max_requests"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not isinstance(self.direct_replies, bool):
            raise ValueError(f"direct_replies must be True or False, got {self.direct_replies!r}")
        if self.idle_timeout is not None and self.idle_timeout <= 0:
            raise ValueError(f"idle_timeout must be positive or None, got {self.idle_timeout}")
        if self.max_forwards < 0:
            raise ValueError(f"max_forwards must not be negative, got {self.max_forwards}")
        for name in ("write_buffer_limit", "max_output_buffer", "max_reassembly_buffer"):
            if getattr(self, name) < 1024:
                raise ValueError(f"{name} must be at least 1024 bytes, got {getattr(self, name)}")
        for name in ("max_nesting_depth", "max_typecode_size", "max_empty_elements"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")

        for name in ("queue_target", "queue_limit"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be a positive number of seconds or None, got {value}")
        if not self.queue_interval > 0:
            raise ValueError(f"queue_interval must be a positive number of seconds, got {self.queue_interval}")

    def value_bounds(self) -> Bounds:
        """The limits checked on received values before they are unmarshaled."""
        return Bounds(self.max_nesting_depth, self.max_typecode_size, self.max_empty_elements)


DEFAULT_CONFIG = Config()
