"""The transport-free half of a client call: request bytes out, result in.

Both clients use it: the asyncio one (pyorb.client.connection and
invocation) and the blocking one (pyorb.client.blocking).  Nothing here
does I/O or knows about event loops.
"""

from __future__ import annotations

import dataclasses
import keyword
from dataclasses import dataclass
import logging
from typing import Any, Callable, NamedTuple

import omniORB
from omniORB import CORBA

from pyorb import _accelerator, marshal
from pyorb.client import errors
from pyorb.marshal import layout
from pyorb.config import Config
from pyorb.giop.cdr import CDRReader
from pyorb.giop.connection import GIOPConnection
from pyorb.giop.detail import exception_detail
from pyorb.giop.errors import ProtocolError
from pyorb.interceptors import ClientInterceptor, ClientRequestInfo
from pyorb.giop.codesets import (
    CS_ISO8859_1,
    CS_UTF8,
    CS_UTF16,
    CodeSetIncompatible,
    code_set_name,
    code_sets_context,
    negotiate,
)
from pyorb.giop.ior import IOR, CodeSetsInfo, GroupComponent, IIOPProfile, ORB_TYPE_OMNIORB, parse_reference
from pyorb.giop.messages import (
    GIOP_1_0,
    GIOP_1_1,
    GIOP_1_2,
    SYNC_NONE,
    SYNC_WITH_TARGET,
    CancelRequest,
    Reply,
    ReplyStatus,
    Request,
    ServiceContext,
    Version,
)
from pyorb.marshal import Operation
from pyorb.marshal.body import operation_descriptors

log = logging.getLogger(__name__)

_CODE_SETS = (code_sets_context(CS_UTF8, CS_UTF16),)


def choose_code_sets(version: Version, server: CodeSetsInfo | None) -> tuple[int, tuple[ServiceContext, ...]]:
    """The char transmission code set of a new connection, and the contexts
    that tell the server, from the first request's GIOP version and its
    target's code sets (CODESET_INCOMPATIBLE if there is no common one).

    GIOP 1.0 has no negotiation: ISO-8859-1, as CORBA says.  A reference
    with code sets gets CORBA's negotiation.  One without (made from a
    corbaloc URL, or an IIOP 1.0 profile) would mean ISO-8859-1 and no wide
    text; pyorb instead names UTF-8 and UTF-16 in its context, which every
    ORB that reads contexts (omniORB, TAO, JacORB, pyorb) honours, so text
    is not limited by how the reference was made.
    """
    if version == GIOP_1_0:
        return CS_ISO8859_1, ()
    if server is None:
        return CS_UTF8, _CODE_SETS
    try:
        tcs_c, tcs_w = negotiate(server)
    except CodeSetIncompatible as exc:
        raise CORBA.CODESET_INCOMPATIBLE(0, CORBA.COMPLETED_NO, str(exc)) from None
    if (tcs_c, tcs_w) == (CS_UTF8, CS_UTF16):
        return CS_UTF8, _CODE_SETS
    return tcs_c, (code_sets_context(tcs_c, tcs_w),)


class RequestWriter:
    """Encodes the requests of one client connection, through its protocol core.

    It owns the request id counter (1, 2, 3, ...; on a bidirectional
    connection every second id from ``first_id``) and the choice of code sets with the
    first request of the connection (whose CodeSets context tells the
    server); the core keeps them for the connection's life.
    """

    __slots__ = ("_next_id", "_first_id", "_step", "_chosen", "core", "little_endian", "max_message_size")

    def __init__(self, config: Config, core: GIOPConnection, first_id: int = 1, step: int = 1) -> None:
        self._next_id = self._first_id = first_id
        self._step = step  # 2 on a bidirectional connection: each side keeps to its parity
        self._chosen = False
        self.core = core
        self.little_endian = config.little_endian
        self.max_message_size = config.max_message_size

    def request(
        self, op: Operation, args: tuple[Any, ...], object_key: bytes, version: Version,
        code_sets: CodeSetsInfo | None = None, orb_type: int | None = None,
        extra_contexts: tuple[ServiceContext, ...] = (),
    ) -> tuple[int, bytes]:
        """The request id and bytes of a call of ``op``.

        ``code_sets`` and ``orb_type`` are the target's (from its IOR
        profile): the first request of the connection chooses its code sets
        and its form of GIOP 1.1 wide text from them.  Raises a CORBA system
        exception (completed NO) if the arguments do not marshal
        (DATA_CONVERSION for text the code set cannot carry), or MARSHAL if
        the body exceeds max_message_size.  ``extra_contexts`` are client
        interceptors' service contexts.
        """
        core = self.core
        contexts: tuple[ServiceContext, ...] = ()
        if not self._chosen:
            # CORBA sends the negotiated code sets once, with the first request.
            cs, contexts = choose_code_sets(version, code_sets)
            core.char_set = cs
            core.wide_giop11 = orb_type != ORB_TYPE_OMNIORB
        if extra_contexts:
            contexts += extra_contexts
        cs = core.char_set
        rid = self._next_id
        step = self._step
        self._next_id = rid + step if rid <= 0xFFFFFFFF - step else self._first_id
        le = self.little_endian
        flags = SYNC_NONE if op.oneway else SYNC_WITH_TARGET
        if version == GIOP_1_2:
            try:
                body = op.args.pack(args, 0, le, cs)
            except CORBA.SystemException as exc:
                raise op.argument_error(args, exc) from None
            if len(body) > self.max_message_size:
                raise self._too_big(op, len(body))
            if not contexts:  # the common case, without building a Request object
                data = core.request_12(rid, flags, object_key, op.name, body, le)
            elif self._chosen:  # a deadline's context, an interceptor's: written without the general writer
                data = core.request_12_contexts(rid, flags, object_key, op.name, contexts, body, le)
            else:  # the first request: its CodeSets context fixes the connection's code sets
                data = core.send(Request(rid, flags, object_key, op.name, body, contexts, version, le))
        else:
            probe = Request(rid, flags, object_key, op.name, b"", contexts, version, le)
            wide11 = version == GIOP_1_1 and bool(core.wide_giop11)
            try:
                body = op.args.pack(args, core.body_offset(probe), le, cs, wide11)
            except CORBA.SystemException as exc:
                raise op.argument_error(args, exc) from None
            if len(body) > self.max_message_size:
                raise self._too_big(op, len(body))
            data = core.send(Request(rid, flags, object_key, op.name, body, contexts, version, le))
        if not self._chosen:
            self._chosen = core.code_sets_chosen = True
            if cs != CS_UTF8:
                log.debug("connection's char code set: %s", code_set_name(cs))
        return rid, data

    def _too_big(self, op: Operation, size: int) -> CORBA.SystemException:
        return CORBA.MARSHAL(omniORB.MARSHAL_MessageSizeExceedLimitOnClient, CORBA.COMPLETED_NO,
                             f"the arguments of {op.name} take {size} bytes, over the {self.max_message_size}-byte "
                             "limit (Config.max_message_size)")

    def cancel(self, request_id: int) -> bytes:
        """A CancelRequest for ``request_id``."""
        return self.core.send(CancelRequest(request_id, little_endian=self.little_endian))


class LocationForward(Exception):
    """The reply says the object is elsewhere: re-send the call to ``target``."""

    def __init__(self, target: IOR) -> None:
        super().__init__(target)
        self.target = target


def reply_result(
    op: Operation, reply: Reply, convert: Callable[[Any, str], Any], bounds: layout.Bounds = layout.DEFAULT_BOUNDS,
    char_set: int = CS_UTF8, wide_giop11: bool | None = False, route: Route | None = None, target: IOR | None = None,
) -> Any:
    """The value a reply to ``op`` carries (see Operation.result_value).

    Raises the user or system exception the reply carries, MARSHAL
    (completed YES) if it cannot be decoded, and :class:`LocationForward`
    for a LOCATION_FORWARD.  ``convert`` turns the omniORB object
    references of a result into the client's proxies; strings are read in
    the connection's ``char_set``, GIOP 1.1 wide text in the standard GIOP
    1.1 form if ``wide_giop11``.  A system exception's text names the call's
    ``route`` and says what the reply's ExceptionDetailMessage said; a
    BAD_OPERATION's names the type id of ``target``.
    """
    status = reply.reply_status
    wide11 = bool(wide_giop11) and reply.version == GIOP_1_1
    if status in (ReplyStatus.LOCATION_FORWARD, ReplyStatus.LOCATION_FORWARD_PERM):
        raise LocationForward(_forward_target(op, reply))
    try:
        if status is ReplyStatus.NO_EXCEPTION:
            return op.reply_value(reply.body, reply.body_offset, reply.little_endian, reply.fragment_starts, bounds,
                                  char_set, wide11, convert)
        if status is ReplyStatus.USER_EXCEPTION:
            error: Exception = op.unpack_user_exception(reply.body, reply.body_offset, reply.little_endian, bounds,
                                                        char_set, wide11, reply.fragment_starts)
            error = op.convert_exception(error, convert)
        elif status is ReplyStatus.SYSTEM_EXCEPTION:
            error = marshal.unpack_system_exception(reply.body, reply.body_offset, reply.little_endian)
            error = errors.reply_exception(error, op, route, target, exception_detail(reply.service_contexts))
        else:  # NEEDS_ADDRESSING_MODE: we already send the simplest form
            error = CORBA.NO_IMPLEMENT(0, CORBA.COMPLETED_NO, f"{errors.call_site(op.name, route)}: the server "
                                       "asks for a target address other than the object key, which pyorb does not send")
    except CORBA.SystemException as exc:
        log.warning("reply to %s could not be decoded: %s", op.name, exc)
        raise CORBA.MARSHAL(exc.minor, CORBA.COMPLETED_YES,
                            f"the reply to {errors.call_site(op.name, route)} could not be decoded: "
                            f"{_info_text(exc)}") from None
    raise error


def _info_text(exc: CORBA.SystemException) -> str:
    info = getattr(exc, "_info", None)
    if isinstance(info, list):
        return ", ".join(str(i) for i in info)
    return str(info) if info else type(exc).__name__


def _forward_target(op: Operation, reply: Reply) -> IOR:
    try:
        return IOR.decode(CDRReader(reply.body, reply.little_endian, base=reply.body_offset))
    except ProtocolError as exc:
        log.warning("bad LOCATION_FORWARD for %s: %s", op.name, exc.reason)
        raise CORBA.MARSHAL(omniORB.MARSHAL_InvalidIOR, CORBA.COMPLETED_NO,
                            f"the server forwarded {op.name} to an unreadable reference: {exc.reason}") from None


def interface_operations(interface: type) -> dict[str, Operation]:
    """The operations of a generated stub class, by Python attribute name.

    An operation named like a Python keyword gets a leading underscore, as
    omniORBpy does.  Raises TypeError if ``interface`` is not a stub class.
    """
    ops: dict[str, Operation] = {}
    repo_id = getattr(interface, "_NP_RepositoryId", "")
    for wire, desc in operation_descriptors(interface).items():
        ops["_" + wire if keyword.iskeyword(wire) else wire] = Operation(wire, desc, repo_id)
    if not ops:
        raise TypeError(f"{interface!r} is not a generated interface stub class")
    return ops


class Reference:
    """What the async and blocking proxies share: an IOR, shown and compared.

    Two references are equal when their IORs are, whichever client they
    are bound to.
    """

    __slots__ = ("_ior",)
    _repr_note = ""

    def __init__(self, ior: IOR) -> None:
        self._ior = ior

    @property
    def ior(self) -> IOR:
        return self._ior

    def __str__(self) -> str:
        return self._ior.to_string()

    def __repr__(self) -> str:
        profile = self._ior.iiop
        where = f"{profile.host}:{profile.port}" if profile else "no IIOP profile"
        return f"<{type(self).__name__} {self._ior.type_id or '?'} at {where}{self._repr_note}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Reference) and other._ior == self._ior

    def __hash__(self) -> int:
        return hash(self._ior)


def reference_ior(ref: object) -> IOR | None:
    """The IOR of a proxy, an IOR, or an IOR/corbaloc string; None for an
    omniORB object reference (the caller converts those).  TypeError otherwise."""
    if isinstance(ref, Reference):
        return ref.ior
    if isinstance(ref, IOR):
        return ref
    if isinstance(ref, str):
        return parse_reference(ref)
    if isinstance(ref, CORBA.Object):
        return None
    raise TypeError(f"expected an IOR or corbaloc string, got {type(ref).__name__}")


class Intercepted:
    """A call's client interceptors (:mod:`pyorb.interceptors`) and what they added."""

    __slots__ = ("interceptors", "info", "contexts")

    def __init__(self, interceptors: tuple[ClientInterceptor, ...], op: Operation, target: IOR) -> None:
        profile = target.iiop
        self.interceptors = interceptors
        self.info = ClientRequestInfo(op.name, profile.object_key if profile is not None else b"", target.type_id,
                                      op.oneway)
        self.contexts: tuple[ServiceContext, ...] = ()

    def send_request(self) -> None:
        """Run every send_request; a CORBA system exception (or UNKNOWN for
        anything else) is the call's, after the ones that ran see it."""
        info = self.info
        for ran, interceptor in enumerate(self.interceptors):
            try:
                interceptor.send_request(info)
            except Exception as exc:
                if isinstance(exc, CORBA.SystemException):
                    failure = type(exc)(exc.minor, CORBA.COMPLETED_NO, exc._info)
                else:
                    log.error("client interceptor %s failed on %s; the call fails with CORBA.UNKNOWN",
                              type(interceptor).__name__, info.operation, exc_info=exc)
                    failure = CORBA.UNKNOWN(omniORB.UNKNOWN_PythonException, CORBA.COMPLETED_NO,
                                            f"client interceptor {type(interceptor).__name__} failed on "
                                            f"{info.operation} with {type(exc).__name__} (see the log)")
                self.interceptors = self.interceptors[:ran]
                self.receive_reply(failure)
                raise failure from None
        self.contexts = tuple(ServiceContext(i, bytes(d)) for i, d in info.request_contexts.items())

    def reply_contexts(self, contexts: tuple[ServiceContext, ...]) -> None:
        self.info.reply_contexts = {c.context_id: c.data for c in contexts}

    def receive_reply(self, exception: BaseException | None) -> None:
        """Every receive_request that ran, last first; their failures are logged, not the call's."""
        interceptors, self.interceptors = self.interceptors, ()  # once per call
        for interceptor in reversed(interceptors):
            try:
                interceptor.receive_reply(self.info, exception)
            except Exception:
                log.exception("client interceptor %s failed in receive_reply of %s", type(interceptor).__name__,
                              self.info.operation)


class Endpoint(NamedTuple):
    """Where a connection goes: host, port, and whether it speaks TLS."""

    host: str
    port: int
    tls: bool = False


class GroupRoutes(NamedTuple):
    """An object group as a client reaches it: one route per member."""

    key: tuple[str, int]
    """(FT domain, group id): the group's identity, whatever reference named it."""
    version: int
    """The reference's membership version: a newer one replaces what the client knew."""
    members: tuple[Route, ...]


@dataclass(frozen=True, slots=True)  # slots: read on every call, faster than a NamedTuple's fields
class Route:
    """Where calls to one object go, and where else to try if that endpoint
    cannot be reached (``fallbacks``, in order)."""

    endpoint: Endpoint
    key: bytes
    version: Version
    fallbacks: tuple[Route, ...] = ()
    code_sets: CodeSetsInfo | None = None
    """The profile's TAG_CODE_SETS (None without one, or if it is malformed)."""
    orb_type: int | None = None
    """The profile's TAG_ORB_TYPE (None without one, or if it is malformed)."""
    group: GroupRoutes | None = None
    """For an object group's reference: its members, among which the client picks per call."""

    def next(self) -> Route | None:
        """The route to try once this one's endpoint refused or did not answer."""
        if not self.fallbacks:
            return None
        first, *rest = self.fallbacks
        return dataclasses.replace(first, fallbacks=tuple(rest))



def route_for(target: IOR, highest: Version, tls: bool = True) -> Route | None:
    """The endpoint, object key and GIOP version for calls to ``target``
    (None without an IIOP profile); the version is the lowest of the
    profile's, ``highest`` and 1.2.

    Every IIOP profile is an address of the object, and so is each of a
    profile's TAG_ALTERNATE_IIOP_ADDRESS components: the first profile's own
    address comes first, the others are the fallbacks in the IOR's order.
    A profile that offers TLS (TAG_SSL_SEC_TRANS) is reached over TLS on its
    TLS port, at each of its hosts, and never in clear: a failed handshake
    does not fall back to plain text.  ``tls`` False ignores TLS offers, so
    TLS-only profiles give no route.

    An object group's reference (TAG_FT_GROUP) gives a route whose
    :attr:`Route.group` lists one route per member (profile), each with its
    own alternates as fallbacks; the client picks a member per call."""
    members: list[tuple[Route, ...]] = []
    group: GroupComponent | None = None
    for profile in target.profiles:
        if not isinstance(profile, IIOPProfile):
            continue
        routes = _profile_routes(profile, highest, tls)
        if routes:
            members.append(routes)
        if group is None:
            try:
                group = profile.group
            except ProtocolError:
                group = None  # unreadable: an ordinary multi-profile reference
    if not members:
        return None
    flat = [route for routes in members for route in routes]
    unique = list(dict.fromkeys(flat))
    first = dataclasses.replace(unique[0], fallbacks=tuple(unique[1:]))
    if group is None or len(members) < 2:
        return first
    # A member's fallbacks are its own alternates, not the other members
    # (group_ior lists those too, for ORBs that only fail over to alternates).
    primaries = {routes[0].endpoint for routes in members}
    member_routes = tuple(
        dataclasses.replace(routes[0], fallbacks=tuple(r for r in routes[1:] if r.endpoint not in primaries))
        for routes in members)
    return dataclasses.replace(first, group=GroupRoutes((group.domain, group.group_id), group.version, member_routes))


def _profile_routes(profile: IIOPProfile, highest: Version, tls: bool) -> tuple[Route, ...]:
    """The routes to one profile: its own address first, then its alternates."""
    version: Version = min(tuple(profile.version), highest, GIOP_1_2)  # type: ignore[assignment]
    try:
        code_sets = profile.code_sets
    except ProtocolError:
        code_sets = None  # as if absent: the component is advice
    try:
        orb_type = profile.orb_type
    except ProtocolError:
        orb_type = None
    try:
        offer = profile.ssl
    except ProtocolError:
        offer = None  # unreadable: treated as absent, and a port-0 profile then gives no route
    addresses = ((profile.host, profile.port), *profile.alternate_addresses)
    if offer is not None and tls:
        endpoints = [Endpoint(host, offer.port, True) for host, _ in addresses]
    else:
        endpoints = [Endpoint(host, port) for host, port in addresses if port != 0]
    routes = [Route(endpoint, profile.object_key, version, code_sets=code_sets, orb_type=orb_type)
              for endpoint in endpoints]
    return tuple(dict.fromkeys(routes))


# With the compiled accelerator, the twin takes its place: once per call a client writes a request.
_accelerator.twin(__name__, "RequestWriter", "pyorb.client._cwriter")
