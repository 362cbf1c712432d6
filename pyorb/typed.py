"""Run-time support for the typed companion modules written by :mod:`pyorb.idl.stubs`.

A companion (``Stock_pyorb`` for IDL module ``Stock``) binds names to the
classes pyorb builds at run time, so that the names its ``.pyi`` declares
exist: the proxy class of each interface, its AMH skeleton and response
handler, and a protocol for its AMI reply handlers.
"""

from __future__ import annotations

import keyword
from typing import TYPE_CHECKING, Any, ClassVar

from omniORB import CORBA

# Generated stubs take the server's names from here, not from where they live.
from pyorb.server.call.servant import ResponseHandler as ResponseHandler
from pyorb.server.call.servant import ServantInfo, amh_skeleton
from pyorb.server.call.servant import response_handler_class as response_handler_class

if TYPE_CHECKING:

    class UserException(Exception):
        """The base of IDL exceptions (``CORBA.UserException`` at run time)."""

        _NP_RepositoryId: ClassVar[str]

    class SystemException(Exception):
        """The base of CORBA's standard exceptions (``CORBA.SystemException`` at run time)."""

        _NP_RepositoryId: ClassVar[str]
        minor: int
        completed: Any

else:
    # omniORB has no type information: typed code names these instead.
    UserException = CORBA.UserException
    SystemException = CORBA.SystemException


def _not_implemented(self: object, rh: ResponseHandler, *args: Any) -> None:
    rh.raise_exception(CORBA.NO_IMPLEMENT(0, CORBA.COMPLETED_NO))


def typed_skeleton(poa_class: type) -> type:
    """The AMH skeleton of ``poa_class`` with every operation defined.

    An operation a subclass does not override replies CORBA.NO_IMPLEMENT, as
    a missing method does with :func:`pyorb.amh_skeleton`; defining them makes
    the methods the stub declares exist at run time.
    """
    skeleton = amh_skeleton(poa_class)
    methods = {("_" + n if keyword.iskeyword(n) else n): _not_implemented for n in ServantInfo(poa_class).declared}
    typed = type(skeleton.__name__, (skeleton,), methods)
    typed.__doc__ = skeleton.__doc__
    return typed
