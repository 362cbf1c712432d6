"""Object references and the per-interface proxy classes.

A proxy method returns an awaitable at once (AMI as futures): many calls can
be in flight on one connection.  For parity with CORBA AMI each operation
also has a callback form, ``sendc_<op>(handler, *args)``, and a polling
form, ``sendp_<op>(*args)`` returning a :class:`Poller`.
"""

from __future__ import annotations

import asyncio
import keyword
import sys
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Generator, Generic, TypeVar, overload

import omniORB
from omniORB import CORBA

from pyorb import marshal
from pyorb.client.calls import Reference
from pyorb.giop.ior import IOR
from pyorb.marshal import Operation, ensure_orb
from pyorb.marshal.body import IS_A, NON_EXISTENT, operation_descriptors

if TYPE_CHECKING:
    from pyorb.client.calls import Route
    from pyorb.client.client import Client

T = TypeVar("T")
P = TypeVar("P", bound="ObjectRef")
_DEFAULT = object()


class ObjectRef(Reference):
    """A reference to a CORBA object, bound to the client that calls it."""

    __slots__ = ("_client", "_route", "_idempotent")
    _interface: ClassVar[type | None] = None

    def __init__(self, client: Client, ior: IOR) -> None:
        self._client = client
        self._ior = ior
        self._route: Route | None = None
        self._idempotent: frozenset[str] = frozenset()
        """Operations the caller declared safe to re-send to another group member after a lost connection."""

    def _invoke(self, op: Operation, args: tuple[Any, ...], timeout: Any = _DEFAULT) -> asyncio.Future[Any]:
        """Every call of this reference starts here: its route is found once, on its first call."""
        client = self._client
        if timeout is _DEFAULT:
            timeout = client.config.call_timeout
        route = self._route
        if route is None:
            route = self._route = client.route(self._ior)
        return client.invoke(self._ior, op, args, timeout, route, op.name in self._idempotent)

    def _is_a(self, repo_id: str, *, timeout: Any = _DEFAULT) -> asyncio.Future[Any]:
        """Ask the server whether the object implements ``repo_id``."""
        return self._invoke(IS_A, (repo_id,), timeout)

    def _non_existent(self, *, timeout: Any = _DEFAULT) -> asyncio.Future[Any]:
        """Ask the server whether the object is gone."""
        return self._invoke(NON_EXISTENT, (), timeout)

    @overload
    def _narrow(self, interface: Callable[[Client, IOR], P]) -> P: ...
    @overload
    def _narrow(self, interface: type) -> Any: ...
    def _narrow(self, interface: Any) -> Any:
        """The same reference seen as ``interface`` (no remote check).

        ``interface`` is a generated stub class or a proxy class (such as a
        typed one from a ``<Module>_pyorb`` companion).
        """
        return proxy_class(interface)(self._client, self._ior)

    def _to_omni(self) -> Any:
        """This reference as an omniORB object reference (for the marshaler)."""
        return ensure_orb().string_to_object(self._ior.to_string())


class ExceptionHolder:
    """What an AMI reply handler's ``<op>_excep`` receives."""

    __slots__ = ("exception",)

    def __init__(self, exception: BaseException) -> None:
        self.exception = exception

    def raise_exception(self) -> None:
        raise self.exception


class Poller(Generic[T]):
    """The polling form of a call (``sendp_<op>``): poll it or await it.

    ``T`` is the type of the reply's value (typed stubs say it).
    """

    __slots__ = ("_future",)

    def __init__(self, future: asyncio.Future[T]) -> None:
        self._future = future

    def is_ready(self) -> bool:
        return self._future.done()

    def result(self) -> T:
        """The reply now: its value, or its exception raised.

        Raises CORBA.TIMEOUT if the reply has not arrived yet (a poll with a
        zero timeout, as in CORBA Messaging).
        """
        if not self._future.done():
            raise CORBA.TIMEOUT(omniORB.TIMEOUT_NoPollerResponseInTime, CORBA.COMPLETED_NO,
                                "the reply has not arrived yet: poll again, or await the poller")
        return self._future.result()

    def __await__(self) -> Generator[Any, None, T]:
        return self._future.__await__()


def ami_name(operation: str) -> str:
    """The name an operation has in AMI: ``sendc_<it>``, ``sendp_<it>`` and the
    reply handler's ``<it>`` / ``<it>_excep``.  An attribute's accessors
    ``_get_x`` / ``_set_x`` become ``get_x`` / ``set_x`` (CORBA Messaging's
    implied IDL, as omniidl and JacORB name them); other operations keep their name."""
    if operation.startswith(("_get_", "_set_")):
        return operation[1:]
    return operation


def _check_handler(handler: Any, name: str) -> None:
    # A handler without the method its reply needs would lose the reply with
    # only a log line: refuse the call instead, before anything is sent.
    missing = [m for m in (name, name + "_excep") if not callable(getattr(handler, m, None))]
    if missing:
        raise TypeError(f"AMI reply handler {type(handler).__name__} has no method {' or '.join(missing)}")


def _deliver_to_handler(handler: Any, name: str) -> Callable[[asyncio.Future[Any]], None]:
    def done(fut: asyncio.Future[Any]) -> None:
        if fut.cancelled():
            return
        exc = fut.exception()
        if exc is None:
            value = fut.result()
            method = getattr(handler, name)
            if isinstance(value, tuple):
                method(*value)
            elif value is None:
                method()
            else:
                method(value)
        else:
            getattr(handler, name + "_excep")(ExceptionHolder(exc))

    return done


def _make_methods(op: Operation, attr: str) -> dict[str, Any]:
    ami = ami_name(attr)
    nargs = op.args.count  # a wrong count is a TypeError at the call, as in omniORBpy, not at the await

    def call(self: ObjectRef, *args: Any, timeout: Any = _DEFAULT) -> asyncio.Future[Any]:
        if len(args) != nargs:
            raise op.arity_error(len(args))
        return self._invoke(op, args, timeout)

    def sendc(self: ObjectRef, handler: Any, *args: Any, timeout: Any = _DEFAULT) -> None:
        if len(args) != nargs:
            raise op.arity_error(len(args))
        _check_handler(handler, ami)
        self._invoke(op, args, timeout).add_done_callback(_deliver_to_handler(handler, ami))

    def sendp(self: ObjectRef, *args: Any, timeout: Any = _DEFAULT) -> Poller[Any]:
        if len(args) != nargs:
            raise op.arity_error(len(args))
        return Poller(self._invoke(op, args, timeout))

    call.__name__ = attr
    call.__doc__ = f"Invoke ``{op.name}``; returns an awaitable of its result."
    sendc.__name__ = "sendc_" + ami
    sendp.__name__ = "sendp_" + ami
    return {attr: call, "sendc_" + ami: sendc, "sendp_" + ami: sendp}


_proxy_classes: dict[type | None, type[ObjectRef]] = {None: ObjectRef}


def proxy_class(interface: type | None) -> type[ObjectRef]:
    """The proxy class for a generated stub class such as ``Stock.Quoter``.

    A proxy class (a subclass of :class:`ObjectRef`) is its own proxy class.
    The proxy of a derived interface subclasses the proxies of its bases.
    """
    if isinstance(interface, type) and issubclass(interface, ObjectRef):
        return interface
    cls = _proxy_classes.get(interface)
    if cls is None:
        assert interface is not None
        methods: dict[str, Any] = {"__slots__": (), "_interface": interface}
        repo_id = getattr(interface, "_NP_RepositoryId", "")
        for wire, desc in operation_descriptors(interface).items():
            attr = "_" + wire if keyword.iskeyword(wire) else wire
            methods.update(_make_methods(Operation(wire, desc, repo_id), attr))
        if not _is_stub_class(interface):
            raise TypeError(f"{interface!r} is not a generated interface stub class")
        bases = tuple(proxy_class(b) for b in interface.__bases__ if _is_stub_class(b)) or (ObjectRef,)
        cls = type(interface.__name__, bases, methods)
        cls.__qualname__ = f"{interface.__module__}.{interface.__name__} (pyorb proxy)"
        _proxy_classes[interface] = cls
    return cls


OBJECT_ID = "IDL:omg.org/CORBA/Object:1.0"


def static_interface(interface: type | str | None) -> type | None:
    """``interface``, or the stub class of a repository id (None for CORBA::Object or an unknown id:
    the reference's own type id decides then)."""
    if isinstance(interface, str):
        # omniORB describes CORBA::Object with an empty repository id.
        return None if interface in ("", OBJECT_ID) else interface_for(interface)
    return interface


def interface_for(repo_id: str) -> type | None:
    """The generated stub class for ``repo_id``, if its IDL is loaded."""
    objref_cls = omniORB.objrefMapping.get(repo_id)
    if objref_cls is None:
        return None
    name = objref_cls.__name__.removeprefix("_objref_")
    module = sys.modules.get(objref_cls.__module__)
    found = getattr(module, name, None)
    if isinstance(found, type) and _is_stub_class(found):
        return found
    return None


def _is_stub_class(cls: type) -> bool:
    """An omniidl interface class (one with no operations is one too)."""
    repo_id = cls.__dict__.get("_NP_RepositoryId")
    return isinstance(repo_id, str) and repo_id in omniORB.objrefMapping


def _to_omni(value: Any) -> Any:
    if isinstance(value, ObjectRef):
        return value._to_omni()
    raise CORBA.BAD_PARAM(omniORB.BAD_PARAM_WrongPythonType, CORBA.COMPLETED_NO,
                          f"expected an object reference (a proxy), got {type(value).__name__}")


marshal.set_objref_hook(_to_omni)
