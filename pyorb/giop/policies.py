"""CORBA Messaging's INVOCATION_POLICIES service context: a call's deadline on the wire.

The context (IOP::INVOCATION_POLICIES, id 7) is an encapsulation of
``Messaging::PolicyValueSeq``, a ``sequence<PolicyValue>`` where
``PolicyValue`` is ``{ulong ptype; sequence<octet> pvalue}`` and each
``pvalue`` is itself an encapsulation of the policy's value.  The timing
policies it can carry:

* ``REQUEST_END_TIME_POLICY_TYPE`` (28) and ``REPLY_END_TIME_POLICY_TYPE``
  (30): a ``TimeBase::UtcT`` (``ulonglong time`` in 100 ns units since
  1582-10-15 00:00 UTC, ``ulong inacclo``, ``ushort inacchi``, ``short tdf``
  in minutes): an absolute time, so clock skew between the hosts shifts it.
  JacORB sends these (its relative timeouts turned into end times).
* ``RELATIVE_REQ_TIMEOUT_POLICY_TYPE`` (31) and
  ``RELATIVE_RT_TIMEOUT_POLICY_TYPE`` (32): a ``TimeBase::TimeT``
  (``ulonglong``, 100 ns units) counted from when the request was sent.

Standard library only, no I/O: bytes in, values out.  Malformed data raises
:class:`~pyorb.giop.errors.ProtocolError`, nothing else.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Callable, Sequence, cast

from pyorb.giop.cdr import new_encapsulation, open_encapsulation
from pyorb.giop.errors import ProtocolError
from pyorb.giop.fast12 import _mutable_twin
from pyorb.giop.messages import SC_INVOCATION_POLICIES, ServiceContext

REQUEST_START_TIME_POLICY_TYPE = 27  # not sent: a receiver that honours it holds the request until then
REQUEST_END_TIME_POLICY_TYPE = 28
REPLY_END_TIME_POLICY_TYPE = 30
RELATIVE_REQ_TIMEOUT_POLICY_TYPE = 31
RELATIVE_RT_TIMEOUT_POLICY_TYPE = 32

UTC_EPOCH_OFFSET = 122_192_928_000_000_000
"""100 ns units from TimeBase's epoch (1582-10-15 00:00 UTC) to the POSIX epoch."""
_TICKS = 10_000_000  # TimeT units per second
_ABSOLUTE = (REQUEST_END_TIME_POLICY_TYPE, REPLY_END_TIME_POLICY_TYPE)
_RELATIVE = (RELATIVE_REQ_TIMEOUT_POLICY_TYPE, RELATIVE_RT_TIMEOUT_POLICY_TYPE)
_MAX_POLICIES = 64  # a PolicyValue takes at least 8 bytes; this bounds the work on a long sequence too


@dataclass(frozen=True, slots=True)
class PolicyValue:
    """One ``Messaging::PolicyValue``: a policy type and its value as an encapsulation."""

    ptype: int
    pvalue: bytes


@dataclass(frozen=True, slots=True)
class UtcT:
    """``TimeBase::UtcT``: ``time`` in 100 ns units since 1582-10-15 00:00 UTC.

    ``inacclo``/``inacchi`` are the 48-bit inaccuracy, ``tdf`` the local time
    zone in minutes east of Greenwich (it does not shift ``time``, which is UTC)."""

    time: int
    inacclo: int = 0
    inacchi: int = 0
    tdf: int = 0

    @classmethod
    def from_posix(cls, seconds: float) -> UtcT:
        """The UtcT of a POSIX time (``time.time()`` seconds), rounded down to 100 ns."""
        return cls(UTC_EPOCH_OFFSET + int(seconds * _TICKS))

    def posix(self) -> float:
        """This time as POSIX seconds (comparable with ``time.time()``)."""
        return (self.time - UTC_EPOCH_OFFSET) / _TICKS


@dataclass(frozen=True, slots=True)
class Timeouts:
    """What one request's INVOCATION_POLICIES say about its time (None: not said)."""

    relative: float | None = None
    """Seconds from when the request was sent: the smallest RelativeRoundtripTimeout or RelativeRequestTimeout."""
    end_time: float | None = None
    """POSIX seconds: the earliest RequestEndTime or ReplyEndTime."""

    def deadline(self, now: float, posix_now: float) -> float | None:
        """The deadline on the receiver's clock: ``now`` (any monotonic clock) is when
        the request arrived, ``posix_now`` the same instant as ``time.time()``.

        A relative timeout wins over an end time when both are there: it
        is measured on one clock, so skew between the hosts cannot shift
        it (the network's one-way delay makes it a little late instead);
        an end time alone (JacORB sends only those) is taken as it is."""
        if self.relative is not None:
            return now + self.relative
        if self.end_time is not None:
            return now + (self.end_time - posix_now)
        return None


# -- values ------------------------------------------------------------------------
def encode_time_t(ticks: int, little_endian: bool = True) -> bytes:
    """A ``TimeBase::TimeT`` (100 ns units) as a policy value encapsulation."""
    w = new_encapsulation(little_endian)
    w.ulonglong(ticks)
    return w.getvalue()


def decode_time_t(pvalue: bytes) -> int:
    """The ``TimeBase::TimeT`` in a policy value encapsulation."""
    return open_encapsulation(pvalue, "TimeBase::TimeT policy value").ulonglong()


def encode_utc_t(value: UtcT, little_endian: bool = True) -> bytes:
    """A ``TimeBase::UtcT`` as a policy value encapsulation."""
    w = new_encapsulation(little_endian)
    w.ulonglong(value.time)
    w.ulong(value.inacclo)
    w.ushort(value.inacchi)
    w.short(value.tdf)
    return w.getvalue()


def decode_utc_t(pvalue: bytes) -> UtcT:
    """The ``TimeBase::UtcT`` in a policy value encapsulation."""
    r = open_encapsulation(pvalue, "TimeBase::UtcT policy value")
    return UtcT(r.ulonglong(), r.ulong(), r.ushort(), r.short())


# -- the sequence -------------------------------------------------------------------
def encode_policies(policies: Sequence[PolicyValue], little_endian: bool = True) -> bytes:
    """The data of an INVOCATION_POLICIES context: ``policies`` as a PolicyValueSeq encapsulation."""
    w = new_encapsulation(little_endian)
    w.ulong(len(policies))
    for policy in policies:
        w.ulong(policy.ptype)
        w.octets(policy.pvalue)
    return w.getvalue()


def decode_policies(data: bytes) -> tuple[PolicyValue, ...]:
    """The PolicyValueSeq of an INVOCATION_POLICIES context's data."""
    r = open_encapsulation(data, "INVOCATION_POLICIES service context")
    count = r.ulong()
    if count > _MAX_POLICIES:
        raise ProtocolError(f"INVOCATION_POLICIES service context: {count} policies, more than {_MAX_POLICIES}")
    if count * 8 > r.remaining:
        raise ProtocolError(f"INVOCATION_POLICIES service context: {count} policies in {r.remaining} bytes")
    return tuple(PolicyValue(r.ulong(), r.octets()) for _ in range(count))


def timeouts(policies: Sequence[PolicyValue]) -> Timeouts:
    """The timing policies among ``policies`` (others are ignored); the tightest of each kind wins."""
    relative: int | None = None
    end: int | None = None
    for policy in policies:
        if policy.ptype in _RELATIVE:
            ticks = decode_time_t(policy.pvalue)
            relative = ticks if relative is None else min(relative, ticks)
        elif policy.ptype in _ABSOLUTE:
            ticks = decode_utc_t(policy.pvalue).time
            end = ticks if end is None else min(end, ticks)
    return Timeouts(None if relative is None else relative / _TICKS,
                    None if end is None else (end - UTC_EPOCH_OFFSET) / _TICKS)




# -- what a client sends --------------------------------------------------------------
_DEADLINE = {
    little_endian: struct.Struct(("<" if little_endian else ">") + "B3xI" + "II" + "B7xQ" + "II" + "B7xQIHh")
    for little_endian in (True, False)
}
_DEADLINE_SIZE = _DEADLINE[True].size
_PACK_LE, _PACK_BE = _DEADLINE[True].pack, _DEADLINE[False].pack
# The fixed parts of that layout, each byte order: what comes before the relative
# timeout's ticks, and the end time's policy type, length and flag (then padding) before its time.
_TICKS_AT, _END_TYPE_AT, _END_AT = 24, 32, 48
_RELATIVE_HEAD_LE, _RELATIVE_HEAD_BE = (_DEADLINE[le].pack(int(le), 2, RELATIVE_RT_TIMEOUT_POLICY_TYPE, 16, int(le), 0,
                                                           0, 0, 0, 0, 0, 0, 0)[:_TICKS_AT] for le in (True, False))
_END_HEAD_LE, _END_HEAD_BE = (_DEADLINE[le].pack(0, 0, 0, 0, 0, 0, REQUEST_END_TIME_POLICY_TYPE, 24, int(le), 0, 0, 0, 0)
                              [_END_TYPE_AT:_END_AT] for le in (True, False))
# By the flag byte: a ulonglong at an offset, in that byte order.
_TICKS_OF: tuple[Callable[[bytes, int], tuple[int]], ...] = (struct.Struct(">Q").unpack_from,
                                                             struct.Struct("<Q").unpack_from)
_MutableContext = _mutable_twin(ServiceContext, ("context_id", "data"))


def deadline_context(timeout: float, now: float, little_endian: bool = True) -> ServiceContext:
    """The INVOCATION_POLICIES context of a call that times out ``timeout`` seconds from
    ``now`` (POSIX seconds, ``time.time()``).

    It carries a RelativeRoundtripTimeout (the remaining time: immune to
    clock skew, read by pyorb) and a RequestEndTime (the same instant as UTC,
    which JacORB reads): the request is worth starting only until then.  Both
    are rounded down to 100 ns, so the receiver's deadline is never later
    than the caller's.  The same bytes as :func:`encode_policies` would
    make, in one step (it runs for every call with a timeout).
    """
    ticks = int(timeout * _TICKS)
    if ticks < 0:
        ticks = 0
    end = UTC_EPOCH_OFFSET + int(now * _TICKS) + ticks
    if little_endian:
        data = _PACK_LE(1, 2, RELATIVE_RT_TIMEOUT_POLICY_TYPE, 16, 1, ticks, REQUEST_END_TIME_POLICY_TYPE, 24, 1, end,
                        0, 0, 0)
    else:
        data = _PACK_BE(0, 2, RELATIVE_RT_TIMEOUT_POLICY_TYPE, 16, 0, ticks, REQUEST_END_TIME_POLICY_TYPE, 24, 0, end,
                        0, 0, 0)
    if _MutableContext is None:
        return ServiceContext(SC_INVOCATION_POLICIES, data)
    # ServiceContext(...) without the frozen dataclass's __init__, which cost a
    # third of this function (fast12._mutable_twin says why this is right).
    context = _MutableContext()
    context.context_id = SC_INVOCATION_POLICIES
    context.data = data
    context.__class__ = ServiceContext
    return cast(ServiceContext, context)


def request_timeouts(contexts: Sequence[ServiceContext]) -> Timeouts | None:
    """The timeouts of a request's INVOCATION_POLICIES context (None without one).

    Raises :class:`ProtocolError` if the context is malformed."""
    for context in contexts:
        if context.context_id == SC_INVOCATION_POLICIES:
            data = context.data
            ticks = _relative_ticks(data)
            if ticks is not None:
                return Timeouts(ticks / _TICKS, (_TICKS_OF[data[0]](data, _END_AT)[0] - UTC_EPOCH_OFFSET) / _TICKS)
            return timeouts(decode_policies(data))
    return None


def request_deadline(contexts: Sequence[ServiceContext], now: float, posix_clock: Callable[[], float]) -> float | None:
    """The deadline of a request with service contexts ``contexts`` on the receiver's
    clock (None if it has no INVOCATION_POLICIES context, or one that sets no time):
    ``now`` (any monotonic clock) is when the request arrived, ``posix_clock`` reads
    ``time.time()``, needed only for an end time without a relative timeout.

    ``request_timeouts(contexts).deadline(now, posix_clock())``, in one step for
    what :func:`deadline_context` writes (every pyorb call with a timeout).
    Raises :class:`ProtocolError` if the context is malformed."""
    for context in contexts:
        if context.context_id == SC_INVOCATION_POLICIES:
            data = context.data
            # _relative_ticks without its frame
            if len(data) == _DEADLINE_SIZE:
                little = data[0]
                if little == 1:
                    if data[:_TICKS_AT] == _RELATIVE_HEAD_LE and data[_END_TYPE_AT:_END_AT] == _END_HEAD_LE:
                        return now + _TICKS_OF[1](data, _TICKS_AT)[0] / _TICKS
                elif not little and data[:_TICKS_AT] == _RELATIVE_HEAD_BE and data[_END_TYPE_AT:_END_AT] == _END_HEAD_BE:
                    return now + _TICKS_OF[0](data, _TICKS_AT)[0] / _TICKS
            found = timeouts(decode_policies(data))
            if found.relative is not None:
                return now + found.relative
            return None if found.end_time is None else now + (found.end_time - posix_clock())
    return None


def _relative_ticks(data: bytes) -> int | None:
    """The RelativeRoundtripTimeout of an INVOCATION_POLICIES context laid out as
    :func:`deadline_context` writes it (that timeout, then a RequestEndTime, padding
    zeroed), or None for any other layout, which the general decoder reads."""
    if len(data) != _DEADLINE_SIZE:
        return None
    little = data[0]
    if little == 1:
        if data[:_TICKS_AT] != _RELATIVE_HEAD_LE or data[_END_TYPE_AT:_END_AT] != _END_HEAD_LE:
            return None
    elif little or data[:_TICKS_AT] != _RELATIVE_HEAD_BE or data[_END_TYPE_AT:_END_AT] != _END_HEAD_BE:
        return None
    return _TICKS_OF[little](data, _TICKS_AT)[0]


__all__ = [
    "RELATIVE_REQ_TIMEOUT_POLICY_TYPE",
    "RELATIVE_RT_TIMEOUT_POLICY_TYPE",
    "REPLY_END_TIME_POLICY_TYPE",
    "REQUEST_START_TIME_POLICY_TYPE",
    "REQUEST_END_TIME_POLICY_TYPE",
    "UTC_EPOCH_OFFSET",
    "PolicyValue",
    "Timeouts",
    "UtcT",
    "deadline_context",
    "decode_policies",
    "decode_time_t",
    "decode_utc_t",
    "encode_policies",
    "encode_time_t",
    "encode_utc_t",
    "request_timeouts",
    "timeouts",
]
