"""The object adapter: object keys to servants, and the built-in operations."""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from pyorb.giop.ior import IOR
from pyorb.marshal import Operation
from pyorb.marshal.body import IS_A, NON_EXISTENT
from pyorb.server.admission import Admission, AdmissionPolicy
from pyorb.server.call.dispatch import Strategy
from pyorb.server.call.servant import OpEntry, ServantInfo, Style, servant_info
from pyorb.server.call.stats import Recorder
from pyorb.server.strategies import StrategyRegistry

if TYPE_CHECKING:
    from pyorb.server.managers import Manager, ServantActivator, ServantLocator

# Operations every CORBA object answers, whatever its interface.
BUILTIN_NAMES = {"_is_a": IS_A, "_non_existent": NON_EXISTENT, "_not_existent": NON_EXISTENT}


@dataclass(frozen=True, slots=True)
class Route:
    """Where one operation of one active servant goes."""

    entry: OpEntry
    strategy: Strategy
    stats: Recorder
    deadline: float | None
    inline: bool = False
    """Synchronous servant code that its strategy runs at once on the loop
    thread, with no deadline: the connection may run it and reply itself."""
    admission: Admission | None = None
    """Its admission control, when its strategy judges each call as it arrives:
    the connection asks it (:meth:`Admission.refusal`) before reading the arguments."""
    queued: bool = False
    """With ``admission``: the strategy queues the calls (judged by the queue's age), not runs them on the loop."""


@dataclass(slots=True)  # not frozen: a servant locator makes one per request, and frozen costs __init__ 3-4 times as much
class Binding:
    """An active servant and, per operation, its strategy (not to be changed once made)."""

    servant: Any
    info: ServantInfo
    routes: dict[str, Route]
    manager: Manager | None = None
    """Set for a key prefix's binding: the manager finds each request's servant."""


@dataclass(frozen=True)
class RouteOptions:
    """How the operations of one servant (or of a prefix's servants) are routed: see :meth:`ObjectAdapter.activate`."""

    strategy: str | Strategy | None = None
    operations: Mapping[str, str | Strategy] = field(default_factory=dict)
    deadline: float | None = None
    deadlines: Mapping[str, float] = field(default_factory=dict)
    admission: AdmissionPolicy | None = None
    admissions: Mapping[str, AdmissionPolicy] = field(default_factory=dict)


def stats_name(info: ServantInfo, op: str) -> str:
    """An operation's name in the statistics: ``Module::Interface.op``."""
    iface = info.type_id.split(":")[1].replace("/", "::") if info.type_id.count(":") >= 2 else info.type_id
    return f"{iface}.{op}"


class ObjectAdapter:
    """Maps object keys to servants, and each of their operations to a strategy.

    Keys are bytes; ``str`` keys are UTF-8.  The strategy of an operation is,
    first found: the one named for it at activation, the servant's, the
    adapter's default.
    """

    def __init__(self, strategy: str | Strategy = "reactive", registry: StrategyRegistry | None = None,
                 admission: AdmissionPolicy = AdmissionPolicy()) -> None:
        self.registry = registry if registry is not None else StrategyRegistry()
        self.default = self.registry.get(strategy)
        self.admission = admission
        """Admission control of the operations activated without their own (``Config.queue_*``)."""
        self.recorders: dict[tuple[str, Strategy, AdmissionPolicy], Recorder] = {}
        """Per (operation, strategy, admission policy): merged into per-operation and per-strategy statistics."""
        self._servants: dict[bytes, Binding] = {}
        self.lookup: Callable[[bytes], Binding | None] = self._servants.get
        """The active servant's binding for an object key, or None (the map's own ``get``: one C call per request)."""
        self._forwards: dict[bytes, IOR] = {}
        self._prefixes: list[tuple[bytes, Binding]] = []  # longest prefix first
        self._counter = itertools.count(1)
        # Generated (transient) keys carry this adapter's incarnation, as a
        # POA's transient policy does: a reference kept from an earlier run
        # gets OBJECT_NOT_EXIST instead of reaching whatever now has its number.
        self.incarnation = os.urandom(8).hex()
        self.interceptors: tuple[Any, ...] = ()
        """The server's request interceptors (:mod:`pyorb.interceptors`), in order."""

    def activate(
        self,
        servant: object,
        key: bytes | str | None = None,
        *,
        strategy: str | Strategy | None = None,
        operations: Mapping[str, str | Strategy] | None = None,
        deadline: float | None = None,
        deadlines: Mapping[str, float] | None = None,
        admission: AdmissionPolicy | None = None,
        admissions: Mapping[str, AdmissionPolicy] | None = None,
    ) -> bytes:
        """Serve ``servant`` under ``key`` (a fresh one if None); returns the key.

        A fresh key (``Class/<incarnation>/<n>``) is unique to this adapter's
        incarnation: after a restart, references to it get OBJECT_NOT_EXIST.
        Give ``key`` for a stable object (corbaloc URLs, references that
        survive restarts).

        ``strategy`` overrides the adapter's default for this servant and
        ``operations`` (operation name to strategy) for single operations.
        ``deadline`` (seconds, every operation) and ``deadlines`` (per
        operation) bound how long a request may take: then the client gets
        CORBA.TIMEOUT and the servant's late reply is discarded.
        ``admission`` (every operation; default: the adapter's) and
        ``admissions`` (per operation) say when calls are refused
        TRANSIENT instead of queued (:mod:`pyorb.server.admission`);
        ``AdmissionPolicy()`` refuses none.
        Raises ValueError for an active key, a bad strategy spec or deadline,
        or an operation the servant's interface does not have.
        """
        info = servant_info(servant)
        if key is None:
            key = f"{type(servant).__name__}/{self.incarnation}/{next(self._counter)}".encode()
        elif isinstance(key, str):
            key = key.encode()
        if key in self._servants:
            raise ValueError(f"object key {key!r} is already active")
        options = RouteOptions(strategy, operations or {}, deadline, deadlines or {}, admission, admissions or {})
        self._servants[key] = Binding(servant, info, self.routes(info, options))
        return key

    def routes(self, info: ServantInfo, options: RouteOptions) -> dict[str, Route]:
        """The routes of a servant class's operations (ValueError for options that do not fit it)."""
        return self._routes(info, options.strategy, options.operations, options.deadline, options.deadlines,
                            self.admission if options.admission is None else options.admission, options.admissions)

    def install(self, key: bytes, binding: Binding) -> None:
        """Make ``binding`` active under ``key`` (a servant activator's incarnation)."""
        self._servants[key] = binding

    # -- key prefixes -------------------------------------------------------------
    def activate_default(self, servant: object, prefix: bytes | str, options: RouteOptions = RouteOptions()) -> None:
        """Serve every key under ``prefix`` that has no servant of its own with ``servant``."""
        from pyorb.server.managers import DefaultServantManager

        key = _key(prefix)
        self._manage(DefaultServantManager(self, key, servant, options))

    def set_locator(self, prefix: bytes | str, locator: ServantLocator, interface: type,
                    options: RouteOptions = RouteOptions()) -> None:
        """Ask ``locator`` for the servant of each request under ``prefix``."""
        from pyorb.server.managers import LocatorManager

        self._manage(LocatorManager(self, _key(prefix), interface_info(interface), locator, options))

    def set_activator(self, prefix: bytes | str, activator: ServantActivator, interface: type,
                      options: RouteOptions = RouteOptions()) -> None:
        """Ask ``activator`` once per key under ``prefix`` for a servant that then stays active."""
        from pyorb.server.managers import ActivatorManager

        self._manage(ActivatorManager(self, _key(prefix), interface_info(interface), activator, options))

    def _manage(self, manager: Manager) -> None:
        prefix = manager.prefix
        if not prefix:
            raise ValueError("a key prefix must not be empty")
        if any(known == prefix for known, _ in self._prefixes):
            raise ValueError(f"key prefix {prefix!r} already has a default servant or servant manager")
        self.routes(manager.interface, manager.options)  # bad options fail here, not on the first request
        self._prefixes.append((prefix, Binding(None, manager.interface, {}, manager)))
        self._prefixes.sort(key=lambda entry: -len(entry[0]))
        self.lookup = self._find

    def _find(self, key: bytes) -> Binding | None:
        found = self._servants.get(key)
        if found is None:
            for prefix, binding in self._prefixes:
                if key.startswith(prefix):
                    return binding
        return found

    def managers(self) -> list[Manager]:
        """The default servants and servant managers, longest prefix first."""
        return [binding.manager for _, binding in self._prefixes if binding.manager is not None]

    def etherealize_all(self) -> None:
        """Deactivate every servant a servant activator made (the server is closing)."""
        from pyorb.server.managers import ActivatorManager

        for manager in self.managers():
            if isinstance(manager, ActivatorManager):
                for key in list(manager.incarnated):
                    self._servants.pop(key, None)
                    manager.etherealize(key)

    async def wait_managers(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the managers' pending postinvoke and etherealize coroutines."""
        for manager in self.managers():
            await manager.wait_background(timeout)

    def _routes(
        self,
        info: ServantInfo,
        strategy: str | Strategy | None,
        operations: Mapping[str, str | Strategy],
        deadline: float | None,
        deadlines: Mapping[str, float],
        admission: AdmissionPolicy,
        admissions: Mapping[str, AdmissionPolicy],
    ) -> dict[str, Route]:
        unknown = sorted((set(operations) | set(deadlines) | set(admissions)) - set(info.declared))
        if unknown:
            raise ValueError(f"{info.type_id} has no operation {', '.join(unknown)}")
        for value in (deadline, *deadlines.values()):
            if value is not None and not value > 0:
                raise ValueError(f"a deadline must be a positive number of seconds, got {value!r}")
        default = self.default if strategy is None else self.registry.get(strategy)
        routes = {}
        for name, entry in info.ops.items():
            spec = operations.get(name)
            chosen = default if spec is None else self.registry.get(spec)
            limit = deadlines.get(name, deadline)
            policy = admissions.get(name, admission)
            # Admission control needs the strategy to see the call first.
            inline = (getattr(chosen, "runs_sync_inline", False) and entry.style is Style.SYNC and limit is None
                      and not policy.active)
            recorder = self._recorder(info, name, chosen, policy)
            # Which of its calls the strategy judges as they arrive (coroutines skip a thread strategy's queue).
            judges = getattr(chosen, "judges_arrivals", None)
            if judges == "queue" and entry.on_loop:
                judges = None
            routes[name] = Route(entry, chosen, recorder, limit, inline,
                                 recorder.admission if judges is not None else None, judges == "queue")
        return routes

    def _recorder(self, info: ServantInfo, op: str, strategy: Strategy, policy: AdmissionPolicy) -> Recorder:
        # The calls carry their recorder, and with it their admission control:
        # one per policy, so that objects activated with different ones keep them.
        name = stats_name(info, op)
        key = (name, strategy, policy)
        recorder = self.recorders.get(key)
        if recorder is None:
            recorder = self.recorders[key] = Recorder()
            if policy.active:
                recorder.admission = Admission(policy, name, strategy.name, recorder)
        return recorder

    def deactivate(self, key: bytes | str) -> None:
        """Stop serving ``key``; a servant activator's incarnation is etherealized
        (its next request incarnates again).  KeyError if nothing is active there."""
        key = _key(key)
        if self._servants.pop(key, None) is None:
            raise KeyError(f"no servant is active under {key!r}")
        from pyorb.server.managers import ActivatorManager

        for manager in self.managers():
            if isinstance(manager, ActivatorManager) and key in manager.incarnated:
                manager.etherealize(key)

    def forward(self, key: bytes | str, target: IOR) -> None:
        """Answer every request for ``key`` with LOCATION_FORWARD to ``target``
        (an object that moved); a servant active under ``key`` takes precedence."""
        self._forwards[key.encode() if isinstance(key, str) else key] = target

    def forwarded(self, key: bytes) -> IOR | None:
        return self._forwards.get(key)

    def type_id(self, key: bytes) -> str:
        """The repository id of the object under ``key``: its servant's, or its prefix's interface."""
        entry = self.lookup(key)
        if entry is None:
            raise KeyError(f"no servant is active under {key!r}, and no default servant or servant manager "
                           "serves a prefix of it")
        return entry.info.type_id

    def __len__(self) -> int:
        return len(self._servants)


def _key(key: bytes | str) -> bytes:
    return key.encode() if isinstance(key, str) else key


def interface_info(interface: type) -> ServantInfo:
    """What a servant manager serves: a generated POA class (``Module__POA.Interface``)."""
    if not isinstance(interface, type) or "_omni_op_d" not in interface.__dict__:
        raise TypeError(f"the interface must be a generated POA class (Module__POA.Interface), not {interface!r}")
    return ServantInfo(interface)
