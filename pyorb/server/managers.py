"""Servant managers and default servants: objects without one active servant each.

Under a key *prefix* the adapter serves every object id (the rest of the
key) one of three ways:

* a default servant (:meth:`ObjectAdapter.activate_default`): one servant
  answers for every id, and reads the id of the request it serves from
  :func:`current_object_id`;
* a servant locator (:class:`ServantLocator`): asked per request for the
  servant (``preinvoke``) and told when the request is over
  (``postinvoke``); nothing is kept between requests;
* a servant activator (:class:`ServantActivator`): asked once per id for a
  servant (``incarnate``), which then stays active under the full key until
  it is deactivated or the server closes (``etherealize``).

A manager's answer may also be ``OBJECT_NOT_EXIST`` (raised) or a
:class:`ForwardRequest` (the client is told LOCATION_FORWARD).  The
connection hands a request for a managed key to :meth:`Manager.serve`
(or :meth:`Manager.locate` for a LocateRequest); the manager calls back
``connection.serve`` with the servant it found and the object id, so the
servant runs under its route's strategy, deadline and admission control
like any other, and is answered inline on the loop thread as an activated
synchronous servant is when its route allows.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from dataclasses import dataclass
from time import monotonic
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Protocol

import omniORB
from omniORB import CORBA

from pyorb.giop.detail import key_text
from pyorb.giop.ior import IOR
from pyorb.giop.messages import GIOP_1_2, LocateRequest, LocateStatus, Request
from pyorb.marshal.body import NON_EXISTENT
from pyorb.request_context import current_object_id
from pyorb.server.adapter import Binding, ObjectAdapter, Route, RouteOptions
from pyorb.server.call.servant import ServantInfo, servant_info

if TYPE_CHECKING:
    from pyorb.interceptors import ServerRequestInfo
    from pyorb.server.call.dispatch import ManagedCall
    from pyorb.server.requests import RequestHandler

log = logging.getLogger(__name__)

class ForwardRequest(Exception):
    """Raised by ``preinvoke`` or ``incarnate``: the object lives elsewhere.

    The client is answered LOCATION_FORWARD (OBJECT_FORWARD to a
    LocateRequest) to ``reference``: a stringified IOR, a pyorb proxy, or a
    :class:`pyorb.giop.ior.IOR`.  Clients (pyorb's, omniORB's, JacORB's)
    repeat the request there.
    """

    def __init__(self, reference: Any) -> None:
        super().__init__(reference)
        self.reference = reference

    def target(self) -> IOR:
        """The IOR to forward to; TypeError or ValueError if ``reference`` names none."""
        ref = self.reference
        if isinstance(ref, IOR):
            return ref
        if isinstance(ref, str):
            return IOR.from_string(ref)
        inner = getattr(ref, "_ior", None)  # a pyorb proxy
        if isinstance(inner, IOR):
            return inner
        raise TypeError(f"ForwardRequest needs a stringified IOR, a pyorb proxy or an IOR, not {type(ref).__name__}")


Servant = Any
Cookie = Any


class ServantLocator(Protocol):
    """Finds the servant of each request (a POA's NON_RETAIN servant manager).

    ``preinvoke`` returns ``(servant, cookie)``, or is ``async def`` and is
    awaited on the event loop (bounded by the operation's deadline); it may
    raise ``CORBA.OBJECT_NOT_EXIST`` or :class:`ForwardRequest`.  A
    synchronous ``preinvoke`` runs on the event loop thread: it must not
    block.  ``postinvoke`` runs on the loop thread once the request's outcome
    is decided, for every ``preinvoke`` that returned; it may be ``async def``.
    """

    def preinvoke(self, object_id: bytes, operation: str) -> tuple[Servant, Cookie] | Awaitable[tuple[Servant, Cookie]]:
        ...

    def postinvoke(self, object_id: bytes, operation: str, servant: Servant, cookie: Cookie) -> Awaitable[None] | None:
        ...


class ServantActivator(Protocol):
    """Makes the servant of an object id on its first request (a POA's RETAIN servant manager).

    ``incarnate`` (plain or ``async def``) is called once per id however
    many first requests arrive at once; the servant it returns is then
    active under the full key.  ``etherealize`` (plain or ``async def``) is
    called when that key is deactivated and when the server closes.
    """

    def incarnate(self, object_id: bytes) -> Servant | Awaitable[Servant]:
        ...

    def etherealize(self, object_id: bytes, servant: Servant) -> Awaitable[None] | None:
        ...


class Manager:
    """Everything under one key prefix: the interface it serves and how."""

    kind = "manager"

    def __init__(self, adapter: ObjectAdapter, prefix: bytes, interface: ServantInfo, options: RouteOptions) -> None:
        self.adapter = adapter
        self.prefix = prefix
        self.interface = interface
        self.options = options
        self._classes: dict[type, tuple[ServantInfo, dict[str, Route]]] = {}
        self._background: set[asyncio.Future[Any]] = set()
        self._skip = len(prefix)

    def object_id(self, key: bytes) -> bytes:
        return key[self._skip:]

    def binding(self, servant: Any, key: bytes) -> Binding:
        """The binding of a servant this manager found for ``key``: its class's
        info and routes, made (and the class checked) once per class."""
        known = self._classes.get(type(servant))
        if known is None:
            self.checked(servant, key)
            info = servant_info(servant)
            known = self._classes[type(servant)] = (info, self.adapter.routes(info, self.options))
        return Binding(servant, known[0], known[1])

    def checked(self, servant: Any, key: bytes) -> Any:
        """``servant`` if it serves this manager's interface, else OBJ_ADAPTER saying what it is."""
        try:
            info = servant_info(servant)
        except TypeError:
            info = None
        if info is None or not info.is_a(self.interface.type_id):
            raise CORBA.OBJ_ADAPTER(0, CORBA.COMPLETED_NO, f"the {self.kind} under {key_text(self.prefix)} gave "
                                                           f"a {type(servant).__name__} for {key_text(key)}, not "
                                                           f"a servant of {self.interface.type_id}")
        return servant

    def serve(self, conn: RequestHandler, req: Request, info: ServerRequestInfo | None,
              deadline: float | None = None) -> None:
        """Serve ``req`` (``deadline``: the client's, in ``time.monotonic()`` seconds, or None)."""
        raise NotImplementedError

    def locate(self, conn: RequestHandler, req: LocateRequest) -> None:
        conn.locate_here(req)

    def builtin(self, conn: RequestHandler, req: Request) -> bool:
        """Answer ``_is_a`` from the interface; False for any other operation."""
        if req.operation != "_is_a":
            return False
        conn._builtin_or_missing(req, self.interface)
        return True

    def keep(self, outcome: Awaitable[Any], what: str) -> None:
        """Run a manager's coroutine (postinvoke, etherealize) to its end, logging a failure."""
        future = asyncio.ensure_future(outcome)
        self._background.add(future)
        future.add_done_callback(lambda f: self._kept(f, what))

    def _kept(self, future: asyncio.Future[Any], what: str) -> None:
        self._background.discard(future)
        if not future.cancelled() and future.exception() is not None:
            log.error("%s under %s failed", what, key_text(self.prefix), exc_info=future.exception())

    async def wait_background(self, timeout: float) -> None:
        if self._background:
            await asyncio.wait(list(self._background), timeout=timeout)

    def deadline(self, operation: str) -> float | None:
        return self.options.deadlines.get(operation, self.options.deadline)

    # -- failures ---------------------------------------------------------------
    def failed(self, conn: RequestHandler, req: Request, exc: BaseException, what: str) -> None:
        """Answer a request whose servant could not be found: ``exc`` came from ``what``."""
        if isinstance(exc, ForwardRequest):
            target = self._target(exc, what)
            if target is not None:
                conn.forward(req, target)
                return
            exc = CORBA.OBJ_ADAPTER(0, CORBA.COMPLETED_NO)
        system, detail = self._system(req.object_key, exc, what)
        conn._system_exception(req, system, None, detail)

    def locate_failed(self, conn: RequestHandler, req: LocateRequest, exc: BaseException, what: str) -> None:
        """Answer a LocateRequest: forwarded, unknown, or (GIOP 1.2) the system exception."""
        if isinstance(exc, ForwardRequest):
            target = self._target(exc, what)
            if target is not None:
                conn.locate_reply(req, LocateStatus.OBJECT_FORWARD, target)
                return
            exc = CORBA.OBJ_ADAPTER(0, CORBA.COMPLETED_NO)
        if isinstance(exc, CORBA.OBJECT_NOT_EXIST) or req.version != GIOP_1_2:
            conn.locate_reply(req, LocateStatus.UNKNOWN_OBJECT)
            return
        conn.locate_exception(req, self._system(req.object_key, exc, what)[0])

    def _target(self, exc: ForwardRequest, what: str) -> IOR | None:
        try:
            return exc.target()
        except (TypeError, ValueError) as error:
            log.error("%s under %s raised ForwardRequest without a usable reference: %s",
                      what, key_text(self.prefix), error)
            return None

    def _system(self, key: bytes, exc: BaseException, what: str) -> tuple[CORBA.SystemException, str]:
        where = f"{what} under {key_text(self.prefix)} for {key_text(key)}"
        if isinstance(exc, CORBA.OBJECT_NOT_EXIST):
            return (CORBA.OBJECT_NOT_EXIST(exc.minor or omniORB.OBJECT_NOT_EXIST_NoMatch, CORBA.COMPLETED_NO),
                    f"no object with key {key_text(key)} on this server ({what} says so)")
        if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
            return CORBA.TIMEOUT(0, CORBA.COMPLETED_NO), f"{where} did not answer within the operation's deadline"
        if isinstance(exc, CORBA.OBJ_ADAPTER):
            return CORBA.OBJ_ADAPTER(exc.minor, CORBA.COMPLETED_NO), str(exc._info or where)
        if isinstance(exc, CORBA.SystemException):
            return type(exc)(exc.minor, CORBA.COMPLETED_NO), f"{where} raised {type(exc).__name__}"
        log.error("%s raised; the client gets CORBA.UNKNOWN", where, exc_info=exc)
        return (CORBA.UNKNOWN(omniORB.UNKNOWN_PythonException, CORBA.COMPLETED_NO),
                f"{where} raised a Python {type(exc).__name__} (the server's log has the details)")


class DefaultServantManager(Manager):
    """One servant for every object id under the prefix."""

    kind = "default servant"

    def __init__(self, adapter: ObjectAdapter, prefix: bytes, servant: Any, options: RouteOptions) -> None:
        super().__init__(adapter, prefix, servant_info(servant), options)
        self.servant = servant
        self.plain = self.binding(servant, prefix)

    def serve(self, conn: RequestHandler, req: Request, info: ServerRequestInfo | None,
              deadline: float | None = None) -> None:
        conn.serve(req, self.plain, info, deadline, req.object_key[self._skip:])


class LocatorManager(Manager):
    """A :class:`ServantLocator` asked per request."""

    kind = "servant locator"

    def __init__(self, adapter: ObjectAdapter, prefix: bytes, interface: ServantInfo, locator: ServantLocator,
                 options: RouteOptions) -> None:
        super().__init__(adapter, prefix, interface, options)
        self.locator = locator
        self._routes: dict[type, Binding] = {}
        """Per servant class: its info and routes (the servant left None), checked once."""
        self._after = self._call_settled  # made once: a call's postinvoke, with no callable made per request

    def serve(self, conn: RequestHandler, req: Request, info: ServerRequestInfo | None,
              deadline: float | None = None) -> None:
        op = req.operation
        if op in _ASKED_BUILTINS and self.builtin(conn, req):
            return
        oid = req.object_key[self._skip:]
        try:
            outcome = self.locator.preinvoke(oid, op)
        except Exception as exc:  # noqa: BLE001 - the locator's failure is the request's
            self.failed(conn, req, exc, "preinvoke")
            return
        if type(outcome) is not tuple and inspect.isawaitable(outcome):
            limit = self.deadline(req.operation)
            if limit is not None:  # the operation's deadline counts from now: the tighter one wins
                own = monotonic() + limit
                deadline = own if deadline is None or own < deadline else deadline
            run_task(conn, req, self._await(conn, req, info, oid, outcome, deadline))
            return
        self._invoke(conn, req, info, oid, outcome, deadline)

    async def _await(self, conn: RequestHandler, req: Request, info: ServerRequestInfo | None, oid: bytes,
                     outcome: Awaitable[Any], deadline: float | None) -> None:
        try:
            found = await asyncio.wait_for(outcome, None if deadline is None else deadline - monotonic())
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001
            if conn.is_open:
                self.failed(conn, req, exc, "preinvoke")
            return
        if not conn.is_open:
            self._post(oid, req.operation, found)
            return
        self._invoke(conn, req, info, oid, found, deadline)

    def _invoke(self, conn: RequestHandler, req: Request, info: ServerRequestInfo | None, oid: bytes,
                found: Any, deadline: float | None) -> None:
        op = req.operation
        routes = None
        if type(found) is tuple and len(found) == 2:
            servant, cookie = found
            routes = self._routes.get(type(servant))  # a class seen before: checked then
        if routes is None:
            routes = self._first(conn, req, oid, found)
            if routes is None:
                return
            servant, cookie = found
        if deadline is not None and deadline <= monotonic():
            self._post(oid, op, found)
            self.failed(conn, req, asyncio.TimeoutError(), "preinvoke")
            return
        if not conn.serve(req, routes, info, deadline, oid, servant, self._after, cookie):
            self._postinvoke(oid, op, servant, cookie)

    def _first(self, conn: RequestHandler, req: Request, oid: bytes, found: Any) -> Binding | None:
        """The routes for what preinvoke returned, its servant's class seen for the first
        time; None if it is not (servant, cookie) of the interface (the request is answered)."""
        try:
            servant, _ = found
            bound = self.binding(servant, req.object_key)
        except Exception as exc:  # noqa: BLE001 - not (servant, cookie) of the interface
            if not isinstance(exc, CORBA.OBJ_ADAPTER):
                exc = CORBA.OBJ_ADAPTER(0, CORBA.COMPLETED_NO, f"the servant locator under {key_text(self.prefix)} "
                                                               f"returned {type(found).__name__} for "
                                                               f"{key_text(req.object_key)}, not (servant, cookie)")
            self._post(oid, req.operation, found)
            self.failed(conn, req, exc, "preinvoke")
            return None
        routes = self._routes[type(servant)] = Binding(None, bound.info, bound.routes)
        return routes

    def _call_settled(self, call: ManagedCall) -> None:
        self._postinvoke(call.object_id, call.operation, call.servant, call.cookie)

    def _post(self, oid: bytes, op: str, found: Any) -> None:
        """postinvoke for what preinvoke returned, well-formed or not."""
        try:
            servant, cookie = found
        except (TypeError, ValueError):
            servant, cookie = found, None
        self._postinvoke(oid, op, servant, cookie)

    def _postinvoke(self, oid: bytes, op: str, servant: Any, cookie: Any) -> None:
        try:
            outcome = self.locator.postinvoke(oid, op, servant, cookie)
        except Exception:  # noqa: BLE001 - the reply is decided: logged
            log.exception("postinvoke under %s for %s failed", key_text(self.prefix), oid)
            return
        if outcome is not None and inspect.isawaitable(outcome):
            self.keep(outcome, "postinvoke")

    def locate(self, conn: RequestHandler, req: LocateRequest) -> None:
        oid = self.object_id(req.object_key)
        try:
            outcome = self.locator.preinvoke(oid, "_locate")
        except Exception as exc:  # noqa: BLE001
            self.locate_failed(conn, req, exc, "preinvoke")
            return
        if inspect.isawaitable(outcome):
            run_task(conn, req, self._await_locate(conn, req, oid, outcome))
            return
        self._located(conn, req, oid, outcome)

    async def _await_locate(self, conn: RequestHandler, req: LocateRequest, oid: bytes,
                            outcome: Awaitable[Any]) -> None:
        try:
            found = await asyncio.wait_for(outcome, self.options.deadline)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001
            if conn.is_open:
                self.locate_failed(conn, req, exc, "preinvoke")
            return
        self._located(conn, req, oid, found)

    def _located(self, conn: RequestHandler, req: LocateRequest, oid: bytes, found: Any) -> None:
        try:
            self.checked(found[0], req.object_key)
        except Exception as exc:  # noqa: BLE001
            self._post(oid, "_locate", found)
            self.locate_failed(conn, req, exc if isinstance(exc, CORBA.OBJ_ADAPTER) else
                               CORBA.OBJ_ADAPTER(0, CORBA.COMPLETED_NO), "preinvoke")
            return
        self._post(oid, "_locate", found)
        conn.locate_here(req)

    def builtin(self, conn: RequestHandler, req: Request) -> bool:
        # _non_existent asks the locator: an id it refuses does not exist.
        if req.operation not in ("_non_existent", "_not_existent"):
            return super().builtin(conn, req)
        oid = self.object_id(req.object_key)
        try:
            outcome = self.locator.preinvoke(oid, req.operation)
        except CORBA.OBJECT_NOT_EXIST:
            conn.builtin_result(req, NON_EXISTENT, True)
            return True
        except Exception as exc:  # noqa: BLE001
            self.failed(conn, req, exc, "preinvoke")
            return True
        if inspect.isawaitable(outcome):
            run_task(conn, req, self._await_existence(conn, req, oid, outcome))
            return True
        self._post(oid, req.operation, outcome)
        conn.builtin_result(req, NON_EXISTENT, False)
        return True

    async def _await_existence(self, conn: RequestHandler, req: Request, oid: bytes,
                               outcome: Awaitable[Any]) -> None:
        try:
            found = await asyncio.wait_for(outcome, self.options.deadline)
        except asyncio.CancelledError:
            raise
        except CORBA.OBJECT_NOT_EXIST:
            conn.builtin_result(req, NON_EXISTENT, True)
            return
        except Exception as exc:  # noqa: BLE001
            if conn.is_open:
                self.failed(conn, req, exc, "preinvoke")
            return
        self._post(oid, req.operation, found)
        conn.builtin_result(req, NON_EXISTENT, False)


class ActivatorManager(Manager):
    """A :class:`ServantActivator`: one incarnation per id, kept active."""

    kind = "servant activator"

    def __init__(self, adapter: ObjectAdapter, prefix: bytes, interface: ServantInfo, activator: ServantActivator,
                 options: RouteOptions) -> None:
        super().__init__(adapter, prefix, interface, options)
        self.activator = activator
        self.incarnated: dict[bytes, Any] = {}
        """Full key to the servant ``incarnate`` made for it, while it is active."""
        self._pending: dict[bytes, asyncio.Future[Any]] = {}

    def serve(self, conn: RequestHandler, req: Request, info: ServerRequestInfo | None,
              deadline: float | None = None) -> None:
        self._incarnate(conn, req, lambda: conn._request(req, info), self.failed)

    def locate(self, conn: RequestHandler, req: LocateRequest) -> None:
        self._incarnate(conn, req, lambda: conn.locate_here(req), self.locate_failed)

    def _incarnate(self, conn: RequestHandler, req: Request | LocateRequest, then: Callable[[], None],
                   failed: Callable[[Any, Any, BaseException, str], None]) -> None:
        key = req.object_key
        pending = self._pending.get(key)
        if pending is None:
            try:
                outcome = self.activator.incarnate(self.object_id(key))
            except Exception as exc:  # noqa: BLE001
                failed(conn, req, exc, "incarnate")
                return
            if not inspect.isawaitable(outcome):
                try:
                    self._install(key, outcome)
                except CORBA.OBJ_ADAPTER as exc:
                    failed(conn, req, exc, "incarnate")
                    return
                then()
                return
            pending = self._pending[key] = asyncio.ensure_future(self._await(key, outcome))
        limit = self.deadline(req.operation) if isinstance(req, Request) else self.options.deadline
        run_task(conn, req, self._wait(conn, req, pending, limit, then, failed))

    async def _await(self, key: bytes, outcome: Awaitable[Any]) -> None:
        try:
            self._install(key, await outcome)
        finally:
            self._pending.pop(key, None)

    async def _wait(self, conn: RequestHandler, req: Request | LocateRequest, pending: asyncio.Future[Any],
                    limit: float | None, then: Callable[[], None],
                    failed: Callable[[Any, Any, BaseException, str], None]) -> None:
        try:
            # Shielded: one waiter's deadline or cancel leaves the incarnation to the others.
            await asyncio.wait_for(asyncio.shield(pending), limit)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001
            if conn.is_open:
                failed(conn, req, exc, "incarnate")
            return
        if conn.is_open and not conn.draining:
            then()

    def _install(self, key: bytes, servant: Any) -> None:
        self.checked(servant, key)
        if key not in self.incarnated:
            self.incarnated[key] = servant
            self.adapter.install(key, self.binding(servant, key))

    def etherealize(self, key: bytes) -> None:
        """``key``'s servant is no longer active: tell the activator."""
        servant = self.incarnated.pop(key)
        try:
            outcome = self.activator.etherealize(self.object_id(key), servant)
        except Exception:  # noqa: BLE001 - deactivation goes on
            log.exception("etherealize under %s for %s failed", key_text(self.prefix), key_text(key))
            return
        if outcome is not None and inspect.isawaitable(outcome):
            self.keep(outcome, "etherealize")


# The built-in operations a locator answers itself (``_is_a``) or asks preinvoke about.
_ASKED_BUILTINS = frozenset({"_is_a", "_non_existent", "_not_existent"})


def run_task(conn: RequestHandler, req: Request | LocateRequest, coro: Any) -> None:
    """Run a manager's coroutine for ``req``, counted in the server's load and
    cancelled by the client's CancelRequest or the server's close."""
    conn.load.started(conn)
    task = conn.loop.create_task(coro)
    rid = req.request_id
    if conn.tasks is None:
        conn.tasks = {}
    conn.tasks[rid] = task

    def done(_task: asyncio.Task[None]) -> None:
        if conn.tasks is not None and conn.tasks.get(rid) is task:
            del conn.tasks[rid]
        conn.load.finished(conn)

    task.add_done_callback(done)


__all__ = ["ForwardRequest", "ServantActivator", "ServantLocator", "current_object_id"]
