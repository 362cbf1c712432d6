"""``pyorb group``: one object group reference from several replicas' references.

The group reference is an IOR whose profiles are the members', each tagged
with FT-CORBA's TAG_FT_GROUP (see :func:`pyorb.giop.ior.group_ior`).  With
``--bind`` it is also stored in a naming service, which is where clients
find it; binding a name that already holds this group keeps its id and
raises its membership version.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Sequence

from omniORB import CORBA

from pyorb.cli.call import CallError, reference, system_exception_line
from pyorb.giop.errors import ProtocolError
from pyorb.giop.ior import IOR, GroupComponent, group_ior, parse_reference


def members(refs: Sequence[str], timeout: float) -> list[IOR]:
    """Each member reference (IOR, corbaloc or corbaname text) as an IOR."""
    found = []
    for text in refs:
        try:
            found.append(parse_reference(reference(text, timeout)))
        except ValueError as exc:
            raise CallError(f"{text[:60]}: {exc}") from None
    return found


def make(refs: Sequence[str], domain: str, group_id: int | None, version: int, bind: str | None,
         naming: str | None, timeout: float) -> str:
    """The group reference (stringified), bound in ``naming`` under ``bind`` if given."""
    if bind is not None and naming is None:
        raise CallError("--bind needs --naming (a corbaloc or corbaname of the naming service)")
    iors = members(refs, timeout)
    previous = asyncio.run(_bound(naming, bind, timeout)) if bind is not None and naming is not None else None
    if group_id is None:
        group_id = previous.group_id if previous is not None and previous.domain == domain else secrets.randbits(63)
    if previous is not None and (previous.domain, previous.group_id) == (domain, group_id):
        version = max(version, previous.version + 1)  # new membership, newer reference
    try:
        group = group_ior(iors, GroupComponent(domain, group_id, version))
    except ValueError as exc:
        raise CallError(str(exc)) from None
    if bind is not None and naming is not None:
        asyncio.run(_rebind(naming, bind, group, timeout))
    return group.to_string()


async def _bound(naming: str, name: str, timeout: float) -> GroupComponent | None:
    from pyorb.client.client import Client
    from pyorb.config import Config
    from pyorb.naming import root_context

    async with Client(Config(call_timeout=timeout)) as client:
        try:
            ref = await root_context(client, naming).resolve(name)
        except CORBA.UserException:
            return None  # not bound yet
        except CORBA.SystemException as exc:
            raise CallError(f"{system_exception_line(exc)}: cannot reach the naming service {naming}") from None
    try:
        return ref._ior.group if ref is not None else None
    except ProtocolError:
        return None


async def _rebind(naming: str, name: str, group: IOR, timeout: float) -> None:
    from pyorb.client.client import Client
    from pyorb.config import Config
    import CosNaming  # loaded by pyorb.naming

    from pyorb.naming import root_context, to_name

    async with Client(Config(call_timeout=timeout)) as client:
        try:
            path = to_name(name)
            context = root_context(client, naming)
            for component in path[:-1]:  # the contexts on the way, made if missing
                try:
                    context = await context.resolve_context([component])
                except CosNaming.NamingContext.NotFound:
                    context = await context.bind_new_context([component])
            await context.rebind(path[-1:], client.resolve(group))
        except CORBA.UserException as exc:
            raise CallError(f"{exc._NP_RepositoryId} binding {name!r} in {naming}") from None
        except CORBA.SystemException as exc:
            raise CallError(f"{system_exception_line(exc)}: cannot bind {name!r} in {naming}") from None
