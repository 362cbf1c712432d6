"""The CORBA system exceptions both clients raise, each saying what happened, where and why.

omniORBpy's system exceptions take a third argument, the text, which
``str()`` and ``repr()`` show alike (``CORBA.TIMEOUT(omniORB.TIMEOUT_CallTimedOutOnClient,
CORBA.COMPLETED_MAYBE, 'no reply to ping from 127.0.0.1:2809 within 0.5 s ...')``).
Each text names the operation, the endpoint (``TLS`` before a TLS one), the
object key where it matters, the limit that was passed and the likely
cause; minor codes are omniORB's where omniORB has one.  The command line
prints the same texts.
"""

from __future__ import annotations

import os
import ssl
from typing import TYPE_CHECKING, Any

import omniORB
from omniORB import CORBA

from pyorb.giop.detail import key_text

if TYPE_CHECKING:
    from pyorb.client.calls import Endpoint, Route
    from pyorb.giop.ior import IOR
    from pyorb.marshal import Operation

_EXCEPTION_MEANINGS = {
    "OBJECT_NOT_EXIST": "no object with this key is there (deactivated, or the server restarted?)",
    "NO_IMPLEMENT": "the servant declares this operation but does not implement it",
    "UNKNOWN": "the servant raised an exception the operation does not declare",
    "TIMEOUT": "the server gave up on the call at its deadline",
    "TRANSIENT": "the server could not take the call now; it did not run it, so a retry is safe",
    "NO_PERMISSION": "the server refused the call",
    "MARSHAL": "the server could not read the request or write the reply",
    "DATA_CONVERSION": "text the connection's code set cannot carry",
    "CODESET_INCOMPATIBLE": "the server cannot read the code set this client chose",
}


def address(endpoint: Endpoint | tuple[Any, ...]) -> str:
    """``host:port``, ``[v6]:port``, with ``TLS `` before a TLS endpoint."""
    host, port = endpoint[0], endpoint[1]
    where = f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return "TLS " + where if len(endpoint) > 2 and endpoint[2] else where


def call_site(op: str, route: Route | None) -> str:
    """``ping on 127.0.0.1:2809 (key 'Echo')``."""
    if route is None:
        return op
    return f"{op} on {address(route.endpoint)} (key {key_text(route.key)})"


def connect_failure(endpoint: Endpoint | tuple[Any, ...], reason: BaseException | str) -> CORBA.SystemException:
    """TRANSIENT (completed NO, omniORB's TRANSIENT_ConnectFailed) for an endpoint
    that refused, did not answer or failed the TLS handshake."""
    return CORBA.TRANSIENT(omniORB.TRANSIENT_ConnectFailed, CORBA.COMPLETED_NO,
                           f"cannot connect to {address(endpoint)}: {os_reason(reason)}")


def os_reason(reason: BaseException | str) -> str:
    """The system's words for a failed socket call (``Connection refused``), not an event loop's."""
    if isinstance(reason, str):
        return reason
    code = getattr(reason, "errno", None)
    if isinstance(reason, OSError) and not isinstance(reason, ssl.SSLError) and isinstance(code, int) and code:
        return os.strerror(code)
    return str(reason) or type(reason).__name__


def tls_refusal(endpoint: Endpoint, alert: BaseException | None) -> CORBA.SystemException:
    """The server closed a new TLS connection before the handshake was complete
    on its side (TLS 1.3 lets a client finish first): it refused this client,
    and read none of its requests."""
    reason = getattr(alert, "reason", None) or ""
    if "CERTIFICATE_REQUIRED" in reason:
        why = "it requires a client certificate, and this client sent none"
    elif "ALERT" in reason:
        why = f"it did not accept this client's certificate ({reason})"
    else:
        why = "no client certificate, or one it does not trust?"
    return connect_failure(endpoint, f"the server refused the TLS handshake ({why})")


def timed_out(op: str, route: Route | None, timeout: float | None, sent: bool = True) -> CORBA.SystemException:
    """TIMEOUT for a call past its timeout: completed MAYBE once it was sent, else NO."""
    limit = f"within {timeout:g} s" if timeout is not None else "in time"
    where = f"from {address(route.endpoint)} " if route is not None else ""
    if sent:
        return CORBA.TIMEOUT(omniORB.TIMEOUT_CallTimedOutOnClient, CORBA.COMPLETED_MAYBE,
                             f"no reply to {op} {where}{limit} (timeout= or Config.call_timeout); "
                             "the server may still run it")
    where = f" to {address(route.endpoint)}" if route is not None else ""
    return CORBA.TIMEOUT(omniORB.TIMEOUT_CallTimedOutOnClient, CORBA.COMPLETED_NO,
                         f"{op} was not sent{where}: its timeout ({limit}) passed while it waited for the connection")


def served_deadline_passed(op: str, left: float) -> CORBA.SystemException:
    """TIMEOUT (completed NO) for a call made from servant code once the request it serves had run out of time."""
    return CORBA.TIMEOUT(omniORB.TIMEOUT_CallTimedOutOnClient, CORBA.COMPLETED_NO,
                         f"{op} was not sent: the deadline of the request being served passed {-left * 1e3:.1f} ms "
                         "ago (Config.propagate_deadlines)")


def connection_lost(op: str, route: Route | None, cause: str, callee: str = "the server") -> CORBA.SystemException:
    """COMM_FAILURE (completed MAYBE) for a call whose connection broke before the reply.

    ``callee`` names who runs the call: on the accepting end of a bidirectional
    connection, the client that opened it."""
    where = f" to {address(route.endpoint)}" if route is not None else ""
    return CORBA.COMM_FAILURE(omniORB.COMM_FAILURE_WaitingForReply, CORBA.COMPLETED_MAYBE,
                              f"the connection{where} broke while {op} awaited its reply ({cause}); "
                              f"{callee} may have run the call")


def not_sent(op: str, route: Route | None, cause: str) -> CORBA.SystemException:
    """COMM_FAILURE (completed NO) for a call whose connection failed before it was sent."""
    where = f" to {address(route.endpoint)}" if route is not None else ""
    return CORBA.COMM_FAILURE(omniORB.COMM_FAILURE_MarshalArguments, CORBA.COMPLETED_NO,
                              f"{op} was not sent: the connection{where} {cause}")


def closed_unanswered(op: str, route: Route | None, callee: str = "the server") -> CORBA.SystemException:
    """TRANSIENT (completed NO) after the peer closed the connection before answering.

    ``callee`` names who would have run the call: on the accepting end of a
    bidirectional connection, the client that opened it."""
    where = f"at {address(route.endpoint)} " if route is not None else ""
    return CORBA.TRANSIENT(omniORB.TRANSIENT_ConnectionClosed, CORBA.COMPLETED_NO,
                           f"{callee} {where}closed the connection before answering {op} (CloseConnection): "
                           "it ran none of it, so a retry is safe")


def group_exhausted(op: str, members: tuple[Route, ...]) -> CORBA.SystemException:
    """TRANSIENT (completed NO) when every member of an object group failed a call."""
    tried = ", ".join(address(m.endpoint) for m in members)
    return CORBA.TRANSIENT(omniORB.TRANSIENT_ConnectFailed, CORBA.COMPLETED_NO,
                           f"no member of the object group could take the call to {op} "
                           f"({len(members)} tried: {tried})")


def hedge_ended(op: str, endpoint: Endpoint) -> CORBA.SystemException:
    """TRANSIENT (completed MAYBE) ending a hedged copy of a call whose member failed it.

    Only the hedge ends: the caller waits on for the call's first copy."""
    return CORBA.TRANSIENT(omniORB.TRANSIENT_FailedOnForwarded, CORBA.COMPLETED_MAYBE,
                           f"the hedged copy of {op} sent to {address(endpoint)} failed there; "
                           "the call waits for its first copy")


def too_many_forwards(op: str, limit: int) -> CORBA.SystemException:
    return CORBA.TRANSIENT(0, CORBA.COMPLETED_NO,
                           f"{op} was forwarded (LOCATION_FORWARD) more than {limit} times "
                           "(Config.max_forwards): a forwarding loop?")


def no_route(op: str, target: IOR, tls: bool) -> CORBA.SystemException:
    """INV_OBJREF for a reference the client has no way to reach."""
    iiop = target.iiop
    if iiop is None:
        why = "it has no IIOP profile"
    elif not tls:
        offer = _tls_offer(target)
        port = f" on TLS port {offer}" if offer is not None else ""
        why = f"it is reachable only over TLS{port}, and this client was made with tls=False"
    else:
        why = "none of its IIOP profiles has a usable address"
    return CORBA.INV_OBJREF(0, CORBA.COMPLETED_NO, f"cannot call {op} through this reference: {why}")


def _tls_offer(target: IOR) -> int | None:
    iiop = target.iiop
    try:
        offer = iiop.ssl if iiop is not None else None
    except Exception:  # an unreadable component is as if absent
        return None
    return offer.port if offer is not None else None


def not_a(expected: str, route: Route | None, target: IOR) -> CORBA.SystemException:
    """BAD_PARAM for a narrow whose ``_is_a`` said no."""
    where = f" at {address(route.endpoint)} (key {key_text(route.key)})" if route is not None else ""
    named = target.type_id or "no type id"
    return CORBA.BAD_PARAM(0, CORBA.COMPLETED_NO,
                           f"the object{where} does not implement {expected}: its _is_a said no "
                           f"(its reference names {named})")


def client_closed() -> CORBA.SystemException:
    return CORBA.BAD_INV_ORDER(omniORB.BAD_INV_ORDER_ORBHasShutdown, CORBA.COMPLETED_NO,
                               "this client is closed: make a new one")


def too_many_pending(op: str, route: Route, limit: int) -> CORBA.SystemException:
    return CORBA.IMP_LIMIT(0, CORBA.COMPLETED_NO,
                           f"{op} was not sent: the connection to {address(route.endpoint)} already has {limit} "
                           "calls awaiting replies (Config.max_pending_calls)")


def reply_exception(exc: CORBA.SystemException, op: Operation, route: Route | None, target: IOR | None,
                    detail: str | None) -> CORBA.SystemException:
    """A system exception a reply carried, with the call's site, its likely meaning
    and what the peer said of it (its ExceptionDetailMessage)."""
    name = type(exc).__name__
    if name == "BAD_OPERATION":
        meaning = "the object does not implement this operation"
        if op.interface:
            meaning += f" of {op.interface}"
        if target is not None and target.type_id and target.type_id != op.interface:
            meaning += f"; its reference names {target.type_id}"
    elif isinstance(exc._info, str):  # said by this client, reading the reply
        meaning = exc._info
    else:
        meaning = _EXCEPTION_MEANINGS.get(name, "the server raised it")
    text = f"{call_site(op.name, route)}: {meaning}"
    if detail:
        text += f"; the server says: {detail}"
    return type(exc)(exc.minor, exc.completed, text)
