"""CORBA system exceptions in Reply bodies: repository id, minor code, completion status."""

from __future__ import annotations

from omniORB import CORBA

from pyorb.giop.cdr import CDRReader, CDRWriter
from pyorb.giop.errors import ProtocolError

_COMPLETION = {0: CORBA.COMPLETED_YES, 1: CORBA.COMPLETED_NO, 2: CORBA.COMPLETED_MAYBE}


def pack_system_exception(exc: CORBA.SystemException, align: int, le: bool) -> bytes:
    w = CDRWriter(le, base=align)
    w.string(exc._NP_RepositoryId)
    w.ulong(exc.minor & 0xFFFFFFFF)
    w.ulong(int(exc.completed._v))
    return w.getvalue()


def unpack_system_exception(body: bytes, align: int, le: bool) -> CORBA.SystemException:
    """Rebuild the CORBA system exception a peer sent (MARSHAL if garbled)."""
    try:
        r = CDRReader(body, le, base=align)
        repo_id, minor, completed = r.string(), r.ulong(), r.ulong()
    except ProtocolError as exc:
        return CORBA.MARSHAL(0, CORBA.COMPLETED_MAYBE, f"a system exception reply that cannot be read: {exc.reason}")
    cls = system_exception_class(repo_id)
    return cls(minor, _COMPLETION.get(completed, CORBA.COMPLETED_MAYBE))


def system_exception_class(repo_id: str) -> type[CORBA.SystemException]:
    prefix = "IDL:omg.org/CORBA/"
    if repo_id.startswith(prefix) and repo_id.endswith(":1.0"):
        cls = getattr(CORBA, repo_id[len(prefix) : -4], None)
        if isinstance(cls, type) and issubclass(cls, CORBA.SystemException):
            return cls
    return CORBA.UNKNOWN  # type: ignore[no-any-return]
