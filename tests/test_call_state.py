"""A server's per-request Call sets up its reply sink's state itself.

``Call.__init__`` assigns :class:`~pyorb.server.call.reply.ReplySink`'s
slots inline rather than calling ``ReplySink.__init__`` (one frame less per
request).  Whatever a sink starts with, a Call and a ManagedCall must start
with the same: a slot added to the sink, or a default changed there, and
not here, fails this test rather than a reply.
"""

from __future__ import annotations

from typing import Any

import pytest
from omniORB import tcInternal

from pyorb.giop.messages import GIOP_1_0, GIOP_1_2
from pyorb.marshal import Operation
from pyorb.server.call.dispatch import Call, ManagedCall
from pyorb.server.call.reply import ReplySink
from pyorb.server.call.servant import OpEntry, Style

OP = Operation("ping", ((tcInternal.tv_ulonglong,), (tcInternal.tv_ulonglong,), {}))
UNSET = object()


def _slots(cls: type) -> list[str]:
    return [name for klass in cls.__mro__ for name in getattr(klass, "__slots__", ())]


def _state(obj: Any, names: list[str]) -> dict[str, Any]:
    return {name: getattr(obj, name, UNSET) for name in names}


@pytest.mark.parametrize("cls", [Call, ManagedCall])
@pytest.mark.parametrize(("version", "little", "expected"), [(GIOP_1_2, True, True), (GIOP_1_0, False, False)])
def test_a_call_starts_with_the_state_its_reply_sink_would(cls: type, version: Any, little: bool,
                                                           expected: bool) -> None:
    channel, stats, servant = object(), object(), object()
    entry = OpEntry(OP, "ping", Style.SYNC, False)
    sink = ReplySink(7, version, little, OP, expected, channel)  # type: ignore[arg-type]
    call = cls(servant, entry, (1,), 7, version, little, expected, channel, stats, b"key", None)
    names = _slots(ReplySink)
    assert len(names) == len(set(names)) >= 10
    assert _state(call, names) == _state(sink, names)
    # every slot of a Call is set once it is made, but its coroutine's (set when it runs as a task)
    assert [name for name, value in _state(call, _slots(Call)).items() if value is UNSET] == ["coro"]
    assert (call.op, call.entry, call.connection, call.object_key) == (OP, entry, channel, b"key")
