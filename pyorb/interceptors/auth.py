"""Authentication and authorization: who is calling, and may they call this?

The caller is known by its verified TLS client certificate (its subject's
common name) or by a bearer token it sends in a service context
(:data:`~pyorb.interceptors.TOKEN_CONTEXT_ID`, added by :class:`BearerToken`
on the client).  :class:`Authorizer` checks each request against rules per
object and per operation; a refused request gets ``CORBA.NO_PERMISSION``
(completed NO) and is counted as ``rejected`` in ``Server.stats()``.  The
servant can ask :func:`caller` who it is serving::

    rules = [Rule(operations="get_*", allow={"reporting", "admin"}),
             Rule(allow={"admin"})]                      # everything else
    server = Server(tls=tls.server_context(cert, key, ca=ca),
                    interceptors=[Authorizer(rules, tokens={"s3cr3t": "reporting"})])

    client = Client(tls=..., interceptors=[BearerToken("s3cr3t")])

A token is only as safe as the connection that carries it: send tokens over
TLS.  Tokens are compared by their SHA-256 digests, so lookups take the same
time whatever the guess.
"""

from __future__ import annotations

import contextvars
import fnmatch
import hashlib
import inspect
import logging
from dataclasses import dataclass
from typing import Awaitable, Callable, Collection, Mapping, NoReturn, Sequence

from omniORB import CORBA

from pyorb.interceptors import TOKEN_CONTEXT_ID, ClientRequestInfo, ServerRequestInfo
from pyorb.tls import describe_certificate

log = logging.getLogger(__name__)

ANYONE = "*"
"""In :attr:`Rule.allow`: any authenticated caller."""
ANONYMOUS = "anonymous"
"""In :attr:`Rule.allow`: a caller with neither certificate nor token."""


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: its name and how it proved it (``"certificate"`` or ``"token"``)."""

    name: str
    via: str


_CALLER: contextvars.ContextVar[Principal | None] = contextvars.ContextVar("pyorb_caller", default=None)


def caller() -> Principal | None:
    """The caller of the request being served (in servant code under an :class:`Authorizer`)."""
    return _CALLER.get()


@dataclass(frozen=True)
class Rule:
    """Who may call what.  ``objects`` (object keys, as text), ``interfaces``
    (repository ids) and ``operations`` are shell-style patterns
    (``fnmatch``); ``allow`` names principals, :data:`ANYONE` or
    :data:`ANONYMOUS`.  The first rule that matches a request decides."""

    allow: Collection[str]
    objects: str = "*"
    operations: str = "*"
    interfaces: str = "*"

    def matches(self, info: ServerRequestInfo) -> bool:
        key = info.object_key.decode("utf-8", "replace")
        return (fnmatch.fnmatchcase(info.operation, self.operations) and fnmatch.fnmatchcase(key, self.objects)
                and fnmatch.fnmatchcase(info.interface, self.interfaces))

    def admits(self, who: Principal | None) -> bool:
        if who is None:
            return ANONYMOUS in self.allow
        return ANYONE in self.allow or who.name in self.allow


TokenCheck = Callable[[str], "str | None | Awaitable[str | None]"]


class Authorizer:
    """A server interceptor that authenticates each caller and applies :class:`Rule` s.

    ``tokens`` maps bearer tokens to principal names, or is a function
    (plain or ``async``) that returns the name for a token, or None to
    refuse it.  A request carrying a token that does not check out is
    refused even if its certificate would pass: a wrong credential is never
    ignored.  Requests no rule matches are refused (``default_allow``
    False) or admitted.
    """

    def __init__(
        self,
        rules: Sequence[Rule],
        *,
        tokens: Mapping[str, str] | TokenCheck | None = None,
        certificates: bool = True,
        default_allow: bool = False,
    ) -> None:
        self.rules = tuple(rules)
        self._digests: dict[bytes, str] | None = None
        self._check: TokenCheck | None = None
        if callable(tokens):
            self._check = tokens
        elif tokens is not None:
            self._digests = {hashlib.sha256(t.encode()).digest(): name for t, name in tokens.items()}
        self.certificates = certificates
        self.default_allow = default_allow

    def receive_request(self, info: ServerRequestInfo) -> Awaitable[None] | None:
        raw = info.request_contexts.get(TOKEN_CONTEXT_ID)
        if raw is not None and self._check is not None:
            return self._checked_async(info, raw)
        self._decide(info, self._identify(info, raw))
        return None

    async def _checked_async(self, info: ServerRequestInfo, raw: bytes) -> None:
        assert self._check is not None
        token = _token_text(raw)
        name = self._check(token) if token is not None else None
        if inspect.isawaitable(name):
            name = await name
        if name is None:
            self._refuse(info, None, "its bearer token was not accepted")
        self._decide(info, Principal(str(name), "token"))

    def _identify(self, info: ServerRequestInfo, raw: bytes | None) -> Principal | None:
        if raw is not None:
            token = _token_text(raw)
            name = None
            if token is not None and self._digests is not None:
                name = self._digests.get(hashlib.sha256(token.encode()).digest())
            if name is None:
                self._refuse(info, None, "its bearer token was not accepted")
            return Principal(name, "token")
        if self.certificates and info.certificate:
            name = describe_certificate(dict(info.certificate))
            if name:
                return Principal(name, "certificate")
        return None

    def _decide(self, info: ServerRequestInfo, who: Principal | None) -> None:
        for rule in self.rules:
            if rule.matches(info):
                if rule.admits(who):
                    _CALLER.set(who)  # the request's own context: the servant sees it
                    return
                self._refuse(info, who, "no rule for this object and operation admits it")
        if not self.default_allow:
            self._refuse(info, who, "no rule matches this object and operation")
        _CALLER.set(who)

    def _refuse(self, info: ServerRequestInfo, who: Principal | None, why: str) -> NoReturn:
        shown = f"{who.name} ({who.via})" if who is not None else "an anonymous caller"
        log.warning("refused %s on %r to %s at %s: %s", info.operation, info.object_key, shown, info.peer, why)
        raise CORBA.NO_PERMISSION(0, CORBA.COMPLETED_NO)

    def send_reply(self, info: ServerRequestInfo, exception: BaseException | None) -> None:
        pass


def _token_text(raw: bytes) -> str | None:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


class BearerToken:
    """A client interceptor that sends a bearer token with every call.

    ``token`` is the token, or a function returning the current one (called
    per call: rotate tokens without a new client)."""

    def __init__(self, token: str | Callable[[], str]) -> None:
        self._token = token

    def send_request(self, info: ClientRequestInfo) -> None:
        token = self._token() if callable(self._token) else self._token
        info.request_contexts[TOKEN_CONTEXT_ID] = token.encode("utf-8")

    def receive_reply(self, info: ClientRequestInfo, exception: BaseException | None) -> None:
        pass


__all__ = ["ANONYMOUS", "ANYONE", "Authorizer", "BearerToken", "Principal", "Rule", "caller"]
