"""The request that servant code is serving, seen from that code and what it calls.

The server puts the request in a context variable while servant code runs
(a synchronous method on a dispatcher thread or the loop thread, a
coroutine's task, an AMH method and the tasks and callbacks it schedules),
so :func:`current` needs no argument, and a client call made from there
takes the request's remaining time as its timeout (see
:func:`inherited_timeout`).  Standard library only: the server and the
client both import it, and never each other.
"""

from __future__ import annotations

import contextvars
import sys
import time
from dataclasses import dataclass
from types import CodeType, FrameType
from typing import Any, Callable, Protocol


class Served(Protocol):
    """What the server keeps in the context variable while a request is served.

    ``deadline`` (``time.monotonic()`` seconds, or None) may be absent: a
    request served without one; so may ``object_id`` (the key after its
    prefix, for a request a default servant or servant manager serves)."""

    @property
    def operation(self) -> str: ...

    @property
    def object_key(self) -> bytes: ...


SERVING: contextvars.ContextVar[Served] = contextvars.ContextVar("pyorb_serving")
"""Set by the server around servant code; read through :func:`current`.  Always
set for a request with a deadline (a client call made from there reads it)."""

_FRAMES: dict[CodeType, tuple[str, str | None]] = {}
_INLINE: list[Callable[[], "tuple[Any, bytes | None] | None"]] = []


def serve_in_frame(code: CodeType, local: str, object_id: str | None = None) -> None:
    """Let :func:`current` find the request in the local ``local`` of a running
    frame of ``code``: where the server runs plain synchronous servant code of
    a request without a deadline, it does not set :data:`SERVING` (a context
    variable set and reset per call costs such a call more than a tenth of
    its instructions).  ``object_id``: the local holding the request's object
    id, if the request itself does not carry it."""
    _FRAMES[code] = (local, object_id)


def serve_inline(lookup: Callable[[], tuple[Any, bytes | None] | None]) -> None:
    """Let :func:`current` ask ``lookup`` for the request that compiled code
    serves inline on the calling thread, where Python code would have a frame
    registered with :func:`serve_in_frame`: ``lookup()`` gives the request and
    its object id, or None when it serves none on that thread."""
    _INLINE.append(lookup)


def _served() -> tuple[Any, bytes | None]:
    """The request servant code serves (or None) and its object id (or None)."""
    served = SERVING.get(None)
    if served is not None:
        return served, getattr(served, "object_id", None)
    for lookup in _INLINE:
        inline = lookup()
        if inline is not None:
            return inline
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        names = _FRAMES.get(frame.f_code)
        if names is not None:
            local, object_id = names
            found = frame.f_locals
            served = found.get(local)
            return served, found.get(object_id) if object_id is not None else getattr(served, "object_id", None)
        frame = frame.f_back
    return None, None


@dataclass(frozen=True, slots=True)
class RequestContext:
    """The request servant code is serving (from :func:`current`).

    Fields may be added; code
    that reads them by name keeps working.
    """

    operation: str
    """The operation's IDL name as it came on the wire (``_get_x`` for an attribute)."""
    object_key: bytes
    """The key of the object the request is for."""
    deadline: float | None
    """When the request's time is up, in ``time.monotonic()`` seconds (comparable
    on any thread of the process); None if it has no time limit.  The
    tighter of the client's timeout (sent with the request) and the
    server's own deadline for the operation."""

    object_id: bytes | None = None
    """The object id (the key after its prefix) under a default servant, servant
    locator or servant activator (docs/servant-managers.md); None for a servant
    activated under its own key."""

    def remaining(self) -> float | None:
        """Seconds left until :attr:`deadline` (negative once it passed); None if unbounded."""
        deadline = self.deadline
        return None if deadline is None else deadline - time.monotonic()


def current() -> RequestContext | None:
    """The request the calling servant code serves, or None outside servant code.

    Available in every servant style: a synchronous method (on the loop
    thread or a dispatcher thread), a coroutine method and the tasks it
    starts, an AMH method and the tasks and loop callbacks it schedules
    (each copies the context when it is made).  Tasks and callbacks a plain
    synchronous method schedules see it only if its request has a deadline,
    and a thread the servant starts itself never does (Python threads start
    with an empty context)."""
    served, object_id = _served()
    if served is None:
        return None
    return RequestContext(served.operation, served.object_key, getattr(served, "deadline", None), object_id)


def current_object_id() -> bytes | None:
    """The object id (the key after its prefix) of the request the calling
    servant code serves under a default servant or servant locator; None
    elsewhere (an activator's servants are active under their own keys):
    ``pyorb.current().object_id`` without the rest of the request.
    Seen from every strategy and servant style, and from the tasks a
    coroutine or AMH method starts."""
    return _served()[1]


def inherited_timeout(timeout: float | None) -> float | None:
    """A client call's timeout, bounded by the remaining time of the request being served.

    Called by the clients only when :data:`SERVING` is set: servant code
    that calls onwards passes its request's remainder on, as gRPC does with
    deadlines.  ``timeout`` (the call's own, or the client's default) wins
    if it is smaller; the result is at most 0 once the request's time is up
    (the caller then fails the call at once, unsent)."""
    served = SERVING.get(None)
    deadline = None if served is None else getattr(served, "deadline", None)
    if deadline is None:
        return timeout
    remaining = deadline - time.monotonic()
    return remaining if timeout is None or remaining < timeout else timeout


__all__ = ["RequestContext", "SERVING", "Served", "current", "current_object_id", "inherited_timeout", "serve_in_frame",
           "serve_inline"]
