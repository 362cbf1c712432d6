"""pyorb: asyncio CORBA (GIOP/IIOP) with AMH servers and AMI clients.

Importing ``pyorb`` is cheap: the public names load their modules (and
omniORB) on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyorb._lazy import lazy_names

if TYPE_CHECKING:
    from pyorb.client.blocking import BlockingClient as BlockingClient
    from pyorb.client.client import Client as Client
    from pyorb.client.proxy import ExceptionHolder as ExceptionHolder, ObjectRef as ObjectRef, Poller as Poller
    from pyorb.config import Config as Config
    from pyorb.giop.errors import ProtocolError as ProtocolError
    from pyorb.idl import compile_idl as compile_idl, load_idl as load_idl
    from pyorb.request_context import RequestContext as RequestContext, current as current
    from pyorb.server.admission import AdmissionPolicy as AdmissionPolicy
    from pyorb.server.strategies import EventLoopStrategy as EventLoopStrategy
    from pyorb.server.server import Server as Server
    from pyorb.server.managers import (
        ForwardRequest as ForwardRequest,
        ServantActivator as ServantActivator,
        ServantLocator as ServantLocator,
        current_object_id as current_object_id,
    )
    from pyorb.server.call.servant import ResponseHandler as ResponseHandler, amh_skeleton as amh_skeleton

    __version__: str

_EXPORTS = {
    "AdmissionPolicy": "pyorb.server.admission",
    "BlockingClient": "pyorb.client.blocking",
    "Client": "pyorb.client.client",
    "Config": "pyorb.config",
    "EventLoopStrategy": "pyorb.server.strategies",
    "ExceptionHolder": "pyorb.client.proxy",
    "ForwardRequest": "pyorb.server.managers",
    "ObjectRef": "pyorb.client.proxy",
    "Poller": "pyorb.client.proxy",
    "ProtocolError": "pyorb.giop.errors",
    "RequestContext": "pyorb.request_context",
    "ResponseHandler": "pyorb.server.call.servant",
    "ServantActivator": "pyorb.server.managers",
    "ServantLocator": "pyorb.server.managers",
    "Server": "pyorb.server.server",
    "amh_skeleton": "pyorb.server.call.servant",
    "compile_idl": "pyorb.idl",
    "current": "pyorb.request_context",
    "current_object_id": "pyorb.server.managers",
    "load_idl": "pyorb.idl",
}

__all__ = sorted([*_EXPORTS, "accelerated"])


def accelerated() -> bool:
    """True if this process runs pyorb's compiled accelerator (C twins of its per-message
    functions, built at install), False if pure Python.

    ``pyorb._accelerator.status()`` says why, and ``pyorb._accelerator.TWINS``
    which twin is in place of which original; ``PYORB_NO_EXTENSIONS=1`` in the
    environment selects pure Python.
    """
    from pyorb import _accelerator

    return _accelerator.status().compiled


_lazy_getattr, __dir__ = lazy_names(__name__, _EXPORTS)
_DISTRIBUTION = "pyorb-asyncio"


def _version() -> str:
    """The installed distribution's version: ``pyproject.toml`` is its one source."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(_DISTRIBUTION)
    except PackageNotFoundError:  # imported from a tree that was never installed
        return "0+unknown"


def __getattr__(name: str) -> object:
    if name == "__version__":
        globals()["__version__"] = found = _version()
        return found
    return _lazy_getattr(name)
