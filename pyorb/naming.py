"""An async API for the CORBA naming service (CosNaming), over pyorb's client.

Names are written in the INS string syntax: components separated by ``/``,
each ``id`` or ``id.kind``, with ``\\`` escaping ``/``, ``.`` and ``\\``
(``"Bench/Echo.object"``, ``"a\\/b.kind"``).  Lists of
``CosNaming.NameComponent`` are accepted too.

``await resolve_corbaname(client, "corbaname::1.2@host:2809#Path/To/Name")``
resolves a name in one call; :class:`NamingContext` wraps a context for
``bind``, ``rebind``, ``unbind``, ``resolve`` and ``list``.  Errors from the
naming service reach the caller as the CosNaming user exceptions
(``CosNaming.NamingContext.NotFound``, ``AlreadyBound``, ``InvalidName``,
``CannotProceed``); a string name that does not parse raises
:class:`NameSyntaxError`, which is both an ``InvalidName`` and a ``ValueError``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Iterable, Sequence, Union

import CosNaming

from pyorb.client.client import Client
from pyorb.client.proxy import ObjectRef
from pyorb.giop.ior import IOR, parse_corbaloc

__all__ = [
    "Binding",
    "BindingType",
    "NameSyntaxError",
    "NamingContext",
    "Name",
    "resolve_corbaname",
    "root_context",
    "to_name",
    "to_string",
]

Name = Union[str, Sequence[Any]]
"""A name: an INS string (``"a.kind/b"``) or a sequence of ``CosNaming.NameComponent``."""

DEFAULT_NAMING_KEY = "NameService"
# Bindings fetched per call while listing a context: one round trip for
# most contexts, bounded memory for huge ones.
LIST_BATCH = 256


class NameSyntaxError(CosNaming.NamingContext.InvalidName, ValueError):  # type: ignore[misc]
    """A string name or corbaname URL that does not parse.

    It is a ``CosNaming.NamingContext.InvalidName`` (what the naming service
    raises for a bad name) and a ``ValueError`` carrying the reason.
    """

    def __init__(self, reason: str) -> None:
        ValueError.__init__(self, reason)
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


# -- string names (INS syntax, CosNaming to_name / to_string) ------------------

_SPECIAL = "/.\\"


def to_name(text: str) -> list[Any]:
    """Parse an INS string name into ``CosNaming.NameComponent``s.

    ``"a/b.kind"`` -> ``[a, b.kind]``; ``".kind"`` has an empty id; ``"."``
    is the component with empty id and kind; ``"a."`` is ``a`` (as omniORB
    reads it).  Raises :class:`NameSyntaxError` for an empty name or
    component, a second unescaped ``.`` in a component, or a ``\\`` not
    followed by ``/``, ``.`` or ``\\``.
    """
    if not text:
        raise NameSyntaxError("empty name")
    components: list[Any] = []
    parts: list[str] = [""]  # the id and, after an unescaped '.', the kind
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            if i + 1 >= len(text) or text[i + 1] not in _SPECIAL:
                raise NameSyntaxError(f"name {text!r}: '\\' at position {i} must escape '/', '.' or '\\'")
            parts[-1] += text[i + 1]
            i += 2
            continue
        if ch == "/":
            components.append(_component(parts, text))
            parts = [""]
        elif ch == ".":
            if len(parts) == 2:
                raise NameSyntaxError(f"name {text!r}: a second unescaped '.' at position {i}")
            parts.append("")
        else:
            parts[-1] += ch
        i += 1
    components.append(_component(parts, text))
    return components


def _component(parts: list[str], text: str) -> Any:
    if parts == [""]:
        raise NameSyntaxError(f"name {text!r} has an empty component")
    return CosNaming.NameComponent(parts[0], parts[1] if len(parts) == 2 else "")


def _escape(text: str) -> str:
    return "".join("\\" + ch if ch in _SPECIAL else ch for ch in text)


def to_string(name: Iterable[Any]) -> str:
    """The INS string form of a sequence of ``NameComponent`` (inverse of :func:`to_name`)."""
    out = []
    for nc in name:
        if not nc.kind:
            out.append(_escape(nc.id) if nc.id else ".")
        else:
            out.append(f"{_escape(nc.id)}.{_escape(nc.kind)}")
    if not out:
        raise NameSyntaxError("empty name")
    return "/".join(out)


def _as_name(name: Name) -> list[Any]:
    if isinstance(name, str):
        return to_name(name)
    components = list(name)
    if not components or not all(isinstance(nc, CosNaming.NameComponent) for nc in components):
        raise NameSyntaxError("a name is a non-empty string or sequence of CosNaming.NameComponent")
    return components


# -- contexts ------------------------------------------------------------------


class BindingType(enum.Enum):
    """What a name is bound to."""

    OBJECT = "object"
    CONTEXT = "context"


@dataclass(frozen=True)
class Binding:
    """One entry of :meth:`NamingContext.list`: its name (INS string) and type."""

    name: str
    type: BindingType


class NamingContext:
    """A naming context: ``await ctx.bind("A/B.kind", obj)``, ``await ctx.resolve(...)``.

    Wraps a pyorb proxy of ``CosNaming::NamingContext``; every method is a
    coroutine that makes remote calls through that proxy's client.
    """

    __slots__ = ("_ref", "_client")

    def __init__(self, client: Client, ref: str | IOR | ObjectRef) -> None:
        self._client = client
        self._ref = client.resolve(ref, CosNaming.NamingContext)

    @property
    def ref(self) -> ObjectRef:
        """The pyorb proxy of this context (pass it to ``bind_context``)."""
        return self._ref  # type: ignore[no-any-return]

    @property
    def client(self) -> Client:
        return self._client

    def __repr__(self) -> str:
        return f"<NamingContext {self._ref!r}>"

    def _wrap(self, ref: ObjectRef) -> NamingContext:
        return NamingContext(self._client, ref)

    async def bind(self, name: Name, obj: ObjectRef) -> None:
        """Bind ``name`` to ``obj``; ``AlreadyBound`` if the name is taken."""
        await self._ref.bind(_as_name(name), obj)

    async def rebind(self, name: Name, obj: ObjectRef) -> None:
        """Bind ``name`` to ``obj``, replacing an existing object binding."""
        await self._ref.rebind(_as_name(name), obj)

    async def bind_context(self, name: Name, context: NamingContext) -> None:
        """Bind ``name`` to another naming context (it takes part in resolution)."""
        await self._ref.bind_context(_as_name(name), context.ref)

    async def rebind_context(self, name: Name, context: NamingContext) -> None:
        await self._ref.rebind_context(_as_name(name), context.ref)

    async def unbind(self, name: Name) -> None:
        """Remove the binding of ``name``; ``NotFound`` if there is none."""
        await self._ref.unbind(_as_name(name))

    async def resolve(self, name: Name, interface: type | None = None) -> Any:
        """The object bound to ``name``, as a pyorb proxy.

        ``interface`` (a generated stub class) types the proxy; without it
        the IOR's type id picks one.  No remote type check: use
        ``client.narrow`` for that.
        """
        obj = await self._ref.resolve(_as_name(name))
        if obj is None or interface is None:
            return obj
        return self._client.resolve(obj, interface)

    async def resolve_context(self, name: Name) -> NamingContext:
        """The naming context bound to ``name``."""
        return self._wrap(await self._ref.resolve(_as_name(name)))

    async def new_context(self) -> NamingContext:
        """A new, unbound context in the same naming service."""
        return self._wrap(await self._ref.new_context())

    async def bind_new_context(self, name: Name) -> NamingContext:
        """Create a context and bind it under ``name``; ``AlreadyBound`` if taken."""
        return self._wrap(await self._ref.bind_new_context(_as_name(name)))

    async def destroy(self) -> None:
        """Destroy this (empty, unbound) context; ``NotEmpty`` otherwise."""
        await self._ref.destroy()

    async def list(self, batch: int = LIST_BATCH) -> list[Binding]:
        """Every binding in this context (one level), in the service's order."""
        if batch < 1:
            raise ValueError(f"batch must be at least 1, got {batch}")
        found, iterator = await self._ref.list(batch)
        bindings = [_binding(b) for b in found]
        if iterator is None:
            return bindings
        try:
            more = True
            while more:
                more, found = await iterator.next_n(batch)
                bindings.extend(_binding(b) for b in found)
        finally:
            await iterator.destroy()
        return bindings


def _binding(b: Any) -> Binding:
    kind = BindingType.CONTEXT if b.binding_type == CosNaming.ncontext else BindingType.OBJECT
    return Binding(to_string(b.binding_name), kind)


# -- corbaname URLs ----------------------------------------------------------------


def _unescape_url(text: str, url: str) -> str:
    """Decode RFC 2396 %-escapes of a corbaname string name (UTF-8)."""
    out = bytearray()
    i = 0
    while i < len(text):
        if text[i] == "%":
            pair = text[i + 1 : i + 3]
            try:
                if len(pair) != 2:
                    raise ValueError
                out.append(int(pair, 16))
            except ValueError:
                raise NameSyntaxError(f"{url!r}: bad %-escape in the name at position {i}") from None
            i += 3
        else:
            out += text[i].encode()
            i += 1
    try:
        return out.decode()
    except UnicodeDecodeError:
        raise NameSyntaxError(f"{url!r}: the %-escaped name is not UTF-8") from None


def parse_corbaname(url: str) -> tuple[IOR, str]:
    """Split ``corbaname:<addresses>[/<key>][#<name>]`` into (context IOR, name).

    The key defaults to ``NameService``; the name (empty for the context
    itself) is %-unescaped.  ``rir:`` addresses and malformed URLs raise
    :class:`NameSyntaxError` (a ``ValueError``).
    """
    url = url.strip()
    if url[:10].lower() != "corbaname:":
        raise NameSyntaxError(f"not a corbaname URL: {url!r}")
    where, _, name = url[10:].partition("#")
    if where.lower().startswith("rir:"):
        raise NameSyntaxError(f"{url!r}: 'rir:' needs a local ORB's initial references; give host:port instead")
    addresses, slash, key = where.partition("/")
    try:
        ior = parse_corbaloc(f"corbaloc:{addresses}/{key if slash else DEFAULT_NAMING_KEY}").to_ior()
    except ValueError as exc:
        raise NameSyntaxError(f"{url!r}: {exc}") from None
    return ior, _unescape_url(name, url)


def root_context(client: Client, ref: str | IOR | ObjectRef) -> NamingContext:
    """A naming context from an IOR, a corbaloc URL or ``corbaname::host:port``."""
    if isinstance(ref, str) and ref.strip()[:10].lower() == "corbaname:":
        ior, name = parse_corbaname(ref)
        if name:
            raise NameSyntaxError(f"{ref!r}: use resolve_corbaname for a URL with a '#name'")
        return NamingContext(client, ior)
    return NamingContext(client, ref)


async def resolve_corbaname(client: Client, url: str, interface: type | None = None) -> Any:
    """Resolve ``corbaname::host:port#Path/To/Name`` to a pyorb proxy.

    Without ``#name`` the result is the naming context itself (a proxy of
    ``CosNaming::NamingContext``).  ``interface`` types the proxy as in
    :meth:`NamingContext.resolve`.
    """
    ior, name = parse_corbaname(url)
    context = NamingContext(client, ior)
    if not name:
        return context.ref if interface is None else client.resolve(context.ref, interface)
    return await context.resolve(name, interface)
