"""The BI_DIR_IIOP service context (IOP id 5) of bidirectional GIOP.

CORBA 3.0 (15.8) lets the client of a GIOP 1.2 connection offer it for
requests the other way: its Requests carry a BI_DIR_IIOP context, an
encapsulation of ``sequence<ListenPoint>`` with ``struct ListenPoint {
string host; unsigned short port; }``, naming the addresses of the objects
the client serves.  A server that accepts the offer may then send
requests for objects at those addresses over that connection instead of
opening one of its own.  Requests then flow both ways on one connection:
the side that opened it numbers its requests with even ids, the side that
accepted it with odd ones, so the two never collide (as omniORB does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from pyorb.giop.cdr import CDRReader, new_encapsulation, open_encapsulation
from pyorb.giop.errors import ProtocolError
from pyorb.giop.messages import ServiceContext

BI_DIR_IIOP = 5

MAX_LISTEN_POINTS = 16
"""Listen points read from one context: a client offers the few addresses it
serves on, not a list to fill memory with."""

FIRST_ID_INITIATOR = 2
"""The first request id of the side that opened a bidirectional connection (then every second one: even)."""
FIRST_ID_ACCEPTOR = 1
"""The first request id of the side that accepted it (odd)."""


@dataclass(frozen=True, slots=True)
class ListenPoint:
    """An address the offering side serves objects on, as its IORs name it."""

    host: str
    port: int


def bidir_context(points: Iterable[tuple[str, int]], little_endian: bool = True) -> ServiceContext:
    """The BI_DIR_IIOP context offering ``points`` ((host, port) pairs)."""
    w = new_encapsulation(little_endian)
    listed = list(points)
    w.ulong(len(listed))
    for host, port in listed:
        if not 0 < port <= 0xFFFF:
            raise ValueError(f"listen point {host}:{port}: the port must be in 1..65535")
        w.string(host)
        w.ushort(port)
    return ServiceContext(BI_DIR_IIOP, w.getvalue())


def _listen_point(r: CDRReader) -> ListenPoint:
    host = r.string()
    port = r.ushort()
    if not host or port == 0:
        raise ProtocolError(f"BI_DIR_IIOP: listen point {host!r}:{port} names no address")
    return ListenPoint(host, port)


def parse_listen_points(data: bytes) -> tuple[ListenPoint, ...]:
    """The listen points of a BI_DIR_IIOP context's data; :class:`ProtocolError`
    if it is not an encapsulated ``sequence<ListenPoint>`` of at most
    :data:`MAX_LISTEN_POINTS` addresses."""
    r = open_encapsulation(data, "BI_DIR_IIOP")
    count = r.ulong()
    if count > MAX_LISTEN_POINTS:
        raise ProtocolError(f"BI_DIR_IIOP: {count} listen points, over the limit of {MAX_LISTEN_POINTS}")
    if count * 7 > r.remaining:  # the smallest: a one-character host (4 + 2 octets) and a port
        raise ProtocolError(f"BI_DIR_IIOP: {count} listen points in {r.remaining} bytes")
    return tuple(_listen_point(r) for _ in range(count))


def listen_points(contexts: Iterable[ServiceContext]) -> tuple[ListenPoint, ...] | None:
    """The listen points a request's BI_DIR_IIOP context offers (None without
    one); :class:`ProtocolError` if the context is malformed."""
    for context in contexts:
        if context.context_id == BI_DIR_IIOP:
            return parse_listen_points(context.data)
    return None


__all__ = ["BI_DIR_IIOP", "FIRST_ID_ACCEPTOR", "FIRST_ID_INITIATOR", "ListenPoint", "MAX_LISTEN_POINTS",
           "bidir_context", "listen_points", "parse_listen_points"]
