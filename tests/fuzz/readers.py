"""Every reader of untrusted CDR data, for the fuzz target and the property tests.

Each takes a :class:`CDRReader` positioned where the data starts; a fuzzer
strings several together on the same reader.
"""

from __future__ import annotations

from typing import Callable

from pyorb.giop.cdr import CDRReader
from pyorb.giop.ior import IOR

CDR_READS: tuple[Callable[[CDRReader], object], ...] = (
    CDRReader.octet,
    CDRReader.boolean,
    CDRReader.ushort,
    CDRReader.short,
    CDRReader.ulong,
    CDRReader.long,
    CDRReader.ulonglong,
    CDRReader.octets,
    CDRReader.string,
    CDRReader.encapsulation,
    lambda r: r.sequence(CDRReader.ulong, min_item_size=4),
    lambda r: r.sequence(CDRReader.string, min_item_size=5),
    lambda r: r.sequence(CDRReader.octets, min_item_size=4),
    IOR.decode,
)


def read_ior(data: bytes) -> IOR:
    """Parse an IOR encapsulation and what its IIOP profile's components hold
    (the accessors decode component data, which is peer data too)."""
    ior = IOR.from_bytes(data)
    profile = ior.iiop
    if profile is not None:
        profile.code_sets, profile.orb_type, profile.alternate_addresses
    return ior
