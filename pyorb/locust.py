"""Locust users for CORBA objects: :class:`CorbaUser`.

A locustfile subclasses :class:`CorbaUser`, names the interface and writes
tasks that call ``self.client.<operation>(...)``::

    from locust import task
    from pyorb.idl import BENCH_IDL
    from pyorb.locust import CorbaUser

    class EchoUser(CorbaUser):
        idl = BENCH_IDL
        interface = "Bench::Echo"

        @task
        def ping(self) -> None:
            self.client.ping(42, check=lambda got: got == 42)

and runs with ``locust -f that_file.py --host <IOR or corbaloc URL>``.
Every call fires Locust's request event (type "CORBA", name = the
operation), so Locust's statistics, web UI, CSV files and distributed mode
work as for HTTP.

Importing this module imports locust, which monkey-patches the process
with gevent: only locustfiles import it, never the rest of pyorb.
"""

from __future__ import annotations

import dataclasses
import logging
import logging.config
import os
import time
from typing import Any, Callable, ClassVar, Mapping, NoReturn

import gevent
from locust import User, constant, events
from locust.env import Environment
from locust.exception import StopTest

from pyorb.client.blocking import BlockingClient, BlockingRef
from pyorb.config import DEFAULT_CONFIG, Config
from pyorb.giop.errors import ProtocolError
from pyorb.giop.ior import parse_reference
from pyorb.giop.messages import SUPPORTED_VERSIONS
from pyorb.idl import load_idl
from pyorb.marshal import Operation

log = logging.getLogger(__name__)

__all__ = ["CorbaClient", "CorbaUser", "UnexpectedResult", "config_from_env"]

REQUEST_TYPE = "CORBA"
_DEFAULT: Any = object()


class UnexpectedResult(Exception):
    """A call returned, but its ``check`` rejected the result."""

    def __init__(self, operation: str, value: Any) -> None:
        super().__init__(f"{operation} returned an unexpected result: {value!r}"[:200])
        self.operation = operation
        self.value = value


class CorbaClient:
    """The ``client`` of a :class:`CorbaUser`: the object's operations, each
    call timed and reported to Locust.

    ``client.op(*args, timeout=None, check=None)`` returns the result, or
    None when the call failed (as Locust's own clients do, a failure is
    reported, not raised).  ``check(result)`` returning false turns a reply
    into a failure (:class:`UnexpectedResult`); the time it takes is not
    counted.  The plain blocking proxy is ``client.proxy``.
    """

    def __init__(self, proxy: BlockingRef, environment: Environment, context: Callable[[], dict[str, Any]]) -> None:
        self.proxy = proxy
        self._fire: Callable[..., None] = environment.events.request.fire
        self._context = context

    def __getattr__(self, name: str) -> Callable[..., Any]:
        op = self.proxy._operations.get(name)
        if op is None:
            raise AttributeError(f"{type(self.proxy).__name__} has no operation {name!r}")

        def call(*args: Any, timeout: Any = _DEFAULT, check: Callable[[Any], Any] | None = None) -> Any:
            return self.call(op, args, timeout, check)

        call.__name__ = name
        setattr(self, name, call)  # later look-ups skip __getattr__
        return call

    def call(
        self,
        op: Operation,
        args: tuple[Any, ...],
        timeout: Any = _DEFAULT,
        check: Callable[[Any], Any] | None = None,
    ) -> Any:
        """Call ``op``, fire Locust's request event, return the result (None on failure)."""
        error: Exception | None = None
        value, size = None, 0
        start = time.perf_counter()
        try:
            if timeout is _DEFAULT:  # the proxy's own default: config.call_timeout
                value, size = self.proxy._call(op, args)
            else:
                value, size = self.proxy._call(op, args, timeout)
        except Exception as exc:  # reported to Locust, whatever it is
            error = exc
        elapsed_ms = (time.perf_counter() - start) * 1000.0
        if error is None and check is not None and not check(value):
            error = UnexpectedResult(op.name, value)
        self._fire(
            request_type=REQUEST_TYPE,
            name=op.name,
            response_time=elapsed_ms,
            response_length=size,
            exception=error,
            context=self._context(),
        )
        return None if error is not None else value


class CorbaUser(User):
    """A Locust user that calls one CORBA object, the one ``host`` names.

    ``host`` (or Locust's ``--host``) is an IOR or a corbaloc URL.  Set
    ``interface`` to the generated stub class, or to its scoped IDL name
    (``"Module::Interface"``) together with ``idl``, the IDL file to load;
    with ``idl`` alone the IOR's type id picks the interface.  ``config``
    sets timeouts and limits (see :func:`config_from_env`).
    ``client_options`` go to each user's :class:`BlockingClient`: ``tls``
    (an ``ssl.SSLContext`` for servers whose IORs offer TLS) and
    ``interceptors`` (e.g. ``[BearerToken("...")]``).

    Each user has its own connection; users run closed-loop (no wait
    between tasks) unless ``wait_time`` says otherwise.  A subclass that
    overrides ``on_stop`` should call ``super().on_stop()`` to close it.
    """

    abstract = True
    wait_time = constant(0)
    interface: ClassVar[type | str | None] = None
    idl: ClassVar[str | os.PathLike[str] | None] = None
    config: ClassVar[Config] = DEFAULT_CONFIG
    client_options: ClassVar[Mapping[str, Any]] = {}
    _stub: ClassVar[type | None] = None

    def __init__(self, environment: Environment) -> None:
        super().__init__(environment)
        if not self.host:
            _stop(environment, "CorbaUser needs a target: set host or pass --host <IOR or corbaloc URL>")
        problem = _reference_problem(self.host)
        if problem:
            _stop(environment, problem)
        self.orb = BlockingClient(self.config, **self.client_options)
        proxy = self.orb.resolve(self.host, self._stub)
        self.client = CorbaClient(proxy, environment, self.context)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Load the IDL while the locustfile is imported: a mistake stops
        # Locust at once, and no user stalls the others compiling it.
        cls._stub = cls.stub_class()
        _refresh_gevent_clock()

    @classmethod
    def stub_class(cls) -> type | None:
        """The generated stub class ``interface`` names (loading ``idl`` first).

        Exits with a message if the IDL or the name is wrong.
        """
        try:
            modules = None if cls.idl is None else load_idl(cls.idl)
        except (OSError, ImportError) as exc:
            _exit(f"{cls.__name__}.idl: {exc}")
        if not isinstance(cls.interface, str):
            return cls.interface
        if modules is None:
            _exit(f"{cls.__name__}.interface is the name {cls.interface!r}: set idl as well")
        found: Any = modules
        for part in cls.interface.split("::"):
            found = getattr(found, part, None)
        if not isinstance(found, type):
            _exit(f"{cls.__name__}.interface: {cls.interface!r} is not defined in {cls.idl}")
        return found

    def on_stop(self) -> None:
        self.orb.close()


def _reference_problem(host: str) -> str | None:
    """Why ``host`` is not an object reference, or None if it is one."""
    try:
        parse_reference(host)
    except (ProtocolError, ValueError) as exc:
        return f"--host {host[:60]!r} is not an IOR or corbaloc URL: {exc}"
    return None


def _check_hosts(environment: Environment, **_kwargs: Any) -> None:
    """Refuse a bad --host before any user starts (a user would only stop the test)."""
    for user_class in environment.user_classes:
        if issubclass(user_class, CorbaUser):
            host = environment.host or user_class.host
            problem = _reference_problem(host) if host else "CorbaUser needs a target: pass --host <IOR or corbaloc URL>"
            if problem:
                raise SystemExit(f"{user_class.__name__}: {problem}")


events.init.add_listener(_check_hosts)  # type: ignore[no-untyped-call]


def _refresh_gevent_clock() -> None:
    # gevent's loop caches the time of its last iteration, and importing
    # locust (then this module, then IDL) blocks it for seconds: Locust's
    # --run-time timer, started next, would fire that much too early.
    gevent.get_hub().loop.update_now()


def _exit(message: str) -> NoReturn:
    """Leave with ``message`` (exit status 1) while a locustfile is imported.

    Locust has not set up its logging yet, so handlers made by the imports
    outlive them; collected while the interpreter finalizes, each takes
    logging's lock through gevent's patched threading, which greenlet no
    longer serves then (gevent 25, the last for Python 3.10, with greenlet
    3.5), and a traceback follows the message.  Resetting logging first, as
    Locust's own set-up does, closes and forgets them.
    """
    logging.config.dictConfig({"version": 1, "disable_existing_loggers": False})
    raise SystemExit(message)


def _stop(environment: Environment, message: str) -> NoReturn:
    """End the test with ``message`` logged and a failing exit code."""
    log.error("%s", message)
    environment.process_exit_code = 2
    raise StopTest(message) from None


def config_from_env(environ: Mapping[str, str] = os.environ, base: Config = DEFAULT_CONFIG) -> Config:
    """A Config from ``PYORB_*`` environment variables, for locustfiles.

    ``PYORB_CALL_TIMEOUT`` (seconds, default 10: a load test must not wait
    forever), ``PYORB_CONNECT_TIMEOUT`` (seconds) and ``PYORB_GIOP``
    (1.0, 1.1 or 1.2).  A bad value exits with a message.
    """
    changes: dict[str, Any] = {"call_timeout": _seconds(environ, "PYORB_CALL_TIMEOUT", 10.0)}
    if "PYORB_CONNECT_TIMEOUT" in environ:
        changes["connect_timeout"] = _seconds(environ, "PYORB_CONNECT_TIMEOUT", base.connect_timeout)
    if "PYORB_GIOP" in environ:
        text = environ["PYORB_GIOP"]
        versions = {f"{v[0]}.{v[1]}": v for v in SUPPORTED_VERSIONS}
        if text not in versions:
            _exit(f"PYORB_GIOP must be one of {', '.join(sorted(versions))}, got {text!r}")
        changes["giop_version"] = versions[text]
    return dataclasses.replace(base, **changes)


def _seconds(environ: Mapping[str, str], name: str, default: float) -> float:
    text = environ.get(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        _exit(f"{name} must be a positive number of seconds, got {text!r}")
    return value
