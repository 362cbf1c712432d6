"""Servant styles, the AMH skeleton and its response handlers.

Three styles are served alike:

* a plain omniORBpy servant (a subclass of ``Module__POA.Interface``) whose
  methods return their results;
* coroutine methods, ``async def op(self, *args)``, whose return value is the
  reply;
* AMH (asynchronous method handling): ``op(self, rh, *args)`` receives a
  response handler first and replies through it whenever it likes.

The AMH skeleton is derived at run time from the generated POA class (the
implied-IDL rules of the AMH paper), so no second code generator is needed.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import keyword
import logging
from dataclasses import dataclass
from typing import Any, Generator

from omniORB import CORBA

from pyorb.marshal import Operation
from pyorb.server.call.reply import ReplySink

log = logging.getLogger(__name__)

OBJECT_REPO_ID = "IDL:omg.org/CORBA/Object:1.0"


class Style(enum.Enum):
    SYNC = "sync"
    COROUTINE = "coroutine"
    AMH = "amh"


@dataclass(frozen=True, slots=True)
class OpEntry:
    """How to call one operation of one servant class."""

    op: Operation
    attr: str
    style: Style
    on_loop: bool
    """The method is ``async def``: it runs as a task on the event loop whatever the strategy."""


class ServantInfo:
    """Per servant class: repository ids it implements and its operations."""

    def __init__(self, cls: type) -> None:
        self.repo_ids = frozenset(_repo_ids(cls))
        self.type_id = getattr(cls, "_NP_RepositoryId", OBJECT_REPO_ID)
        self.ops: dict[str, OpEntry] = {}
        amh = bool(getattr(cls, "_pyorb_amh", False))
        for name, desc in _op_descriptors(cls).items():
            attr = "_" + name if keyword.iskeyword(name) else name
            method = getattr(cls, attr, None)
            if method is None:
                continue  # not implemented: BAD_OPERATION / NO_IMPLEMENT at call time
            is_async = inspect.iscoroutinefunction(method)
            style = Style.AMH if amh else Style.COROUTINE if is_async else Style.SYNC
            self.ops[name] = OpEntry(Operation(name, desc), attr, style, is_async)
        self.declared = frozenset(_op_descriptors(cls))

    def is_a(self, repo_id: str) -> bool:
        return repo_id in self.repo_ids


def _repo_ids(cls: type) -> list[str]:
    ids = [OBJECT_REPO_ID]
    for klass in cls.__mro__:
        rid = klass.__dict__.get("_NP_RepositoryId")
        if isinstance(rid, str) and "_omni_op_d" in klass.__dict__:
            ids.append(rid)
    return ids


def _op_descriptors(cls: type) -> dict[str, tuple[Any, ...]]:
    ops: dict[str, tuple[Any, ...]] = {}
    for klass in reversed(cls.__mro__):
        ops.update(klass.__dict__.get("_omni_op_d", {}))
    return ops


_info_cache: dict[type, ServantInfo] = {}


def servant_info(servant: object) -> ServantInfo:
    cls = type(servant)
    info = _info_cache.get(cls)
    if info is None:
        if not _op_descriptors(cls):
            raise TypeError(
                f"{cls.__qualname__} is not a servant: subclass a generated POA class "
                "(Module__POA.Interface) or pyorb.amh_skeleton(...) of one"
            )
        info = _info_cache[cls] = ServantInfo(cls)
    return info


# -- AMH ------------------------------------------------------------------


class ResponseHandler:
    """Completes one AMH request, from any thread, exactly once.

    ``rh.<op>(results...)`` sends the reply; ``rh.<op>_excep(exc)`` or
    ``rh.raise_exception(exc)`` sends an exception.  A second use raises
    CORBA.BAD_INV_ORDER and sends nothing.  A handler dropped without a reply
    sends CORBA.NO_RESPONSE so that no client waits forever.  ``await rh``
    resolves once the reply has been handed to the transport.
    """

    __slots__ = ("_sink", "_sent", "__weakref__")

    def __init__(self, sink: ReplySink) -> None:
        self._sink = sink
        self._sent: asyncio.Future[None] | None = None

    @property
    def replied(self) -> bool:
        return self._sink.done

    def _reply(self, *values: Any) -> None:
        op = self._sink.op
        value = None if not values else values[0] if len(values) == 1 else values
        if len(values) != op.results.count:
            # The client must not wait forever for a reply that cannot be built.
            log.error("AMH %s replied with %d values, its IDL has %d", op.name, len(values), op.results.count)
            self._sink.exception(CORBA.BAD_PARAM(0, CORBA.COMPLETED_YES))
            raise CORBA.BAD_PARAM(0, CORBA.COMPLETED_NO, f"the AMH reply to {op.name} has {len(values)} values, "
                                                         f"its IDL {op.results.count}; the client got BAD_PARAM")
        self._sink.result(value)

    def raise_exception(self, exc: BaseException) -> None:
        """Send ``exc`` (a declared user exception or a system exception)."""
        if not isinstance(exc, CORBA.Exception):
            log.error("AMH %s replied with a non-CORBA exception %r; sending UNKNOWN", self._sink.op.name, exc)
        self._sink.exception(exc)

    def __await__(self) -> Generator[Any, None, None]:
        if self._sink.done and self._sent is None:
            return
        if self._sent is None:
            self._sent = asyncio.get_running_loop().create_future()
            self._sink.on_sent = self._mark_sent
        yield from self._sent

    def _mark_sent(self) -> None:
        if self._sent is not None and not self._sent.done():
            self._sent.set_result(None)

    def __del__(self) -> None:
        try:
            sink = self._sink
            if not sink.done:
                log.warning("AMH %s: response handler dropped without a reply; sending NO_RESPONSE", sink.op.name)
                sink.exception(CORBA.NO_RESPONSE(0, CORBA.COMPLETED_MAYBE))
        except Exception:  # nothing may escape __del__ (e.g. at interpreter exit)
            pass


_handler_classes: dict[type, type[ResponseHandler]] = {}


def response_handler_class(poa_class: type) -> type[ResponseHandler]:
    """The AMH_<Interface>ResponseHandler class for a generated POA class."""
    cls = _handler_classes.get(poa_class)
    if cls is None:
        methods: dict[str, Any] = {"__slots__": ()}
        for name in _op_descriptors(poa_class):
            attr = "_" + name if keyword.iskeyword(name) else name
            methods[attr] = ResponseHandler._reply
            methods[attr + "_excep"] = ResponseHandler.raise_exception
        iface = poa_class.__name__
        cls = type(f"AMH_{iface}ResponseHandler", (ResponseHandler,), methods)
        _handler_classes[poa_class] = cls
    return cls


def amh_skeleton(poa_class: type) -> type:
    """The AMH skeleton of an interface, from its generated POA class.

    Subclass it and write each operation as ``op(self, rh, *in_args)``
    (``async def`` or plain ``def``); reply with ``rh.op(result, *outs)``.
    """
    if "_omni_op_d" not in poa_class.__dict__:
        raise TypeError(f"{poa_class!r} is not a generated POA class")
    name = f"AMH_{poa_class.__name__}"
    skeleton = type(name, (poa_class,), {"_pyorb_amh": True, "_pyorb_handler": response_handler_class(poa_class)})
    repo_id = getattr(poa_class, "_NP_RepositoryId", "?")
    skeleton.__doc__ = f"AMH skeleton of {repo_id}: operations receive a response handler first."
    return skeleton
