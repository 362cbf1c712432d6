"""Interoperable Object References and corbaloc URLs (code sets are in :mod:`pyorb.giop.codesets`).

Everything here is pure data transformation (no I/O).  Decoders of wire data
(:meth:`IOR.decode`, :meth:`IOR.from_string`, :meth:`CodeSetsInfo.decode`)
raise only :class:`ProtocolError`; functions that take user input (corbaloc
URLs, :func:`parse_reference`, :func:`build_ior` arguments) raise
:class:`ValueError`, because a typo in a URL is not a broken peer.

Layout reminders (CORBA 3.0 ch. 13):

* an IOR is ``string type_id; sequence<TaggedProfile>``; a stringified IOR is
  ``"IOR:"`` + hex of that struct as an encapsulation;
* an IIOP profile body is an encapsulation of ``Version; string host;
  ushort port; sequence<octet> object_key`` followed, from IIOP 1.1 on, by
  ``sequence<TaggedComponent>``.  Every encapsulation carries its own
  byte-order flag, so one IOR may mix byte orders.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field, replace
from typing import Sequence, Union

from pyorb.giop.cdr import CDRReader, CDRWriter, new_encapsulation, open_encapsulation
from pyorb.giop.codesets import CS_ISO8859_1, CS_UTF8, CS_UTF16
from pyorb.giop.errors import ProtocolError

# --- tags ---------------------------------------------------------------------

# Profile tags (IOP::ProfileId).
TAG_INTERNET_IOP = 0
TAG_MULTIPLE_COMPONENTS = 1
# Component tags (IOP::ComponentId).
TAG_ORB_TYPE = 0
TAG_CODE_SETS = 1
TAG_ALTERNATE_IIOP_ADDRESS = 3
TAG_SSL_SEC_TRANS = 20  # SSLIOP::SSL: the object is reachable over TLS on another port
TAG_FT_GROUP = 27  # FT::TagFTGroupTaggedComponent: this profile is one member of an object group

# Security::AssociationOptions bits, as SSLIOP's target_supports/target_requires carry them.
NO_PROTECTION = 0x0001
INTEGRITY = 0x0002
CONFIDENTIALITY = 0x0004
DETECT_REPLAY = 0x0008
DETECT_MISORDERING = 0x0010
ESTABLISH_TRUST_IN_TARGET = 0x0020
ESTABLISH_TRUST_IN_CLIENT = 0x0040
TLS_PROTECTION = INTEGRITY | CONFIDENTIALITY | DETECT_REPLAY | DETECT_MISORDERING
"""What a TLS connection gives: the options a server that requires TLS requires."""

# omniORB's TAG_ORB_TYPE value: the bytes "ATT\0" read as a ulong.
ORB_TYPE_OMNIORB = 0x41545400

DEFAULT_CORBALOC_PORT = 2809
_IIOP_VERSIONS = ((1, 0), (1, 1), (1, 2))


# --- components ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TaggedComponent:
    """An IOP::TaggedComponent; ``data`` is kept verbatim."""

    tag: int
    data: bytes


@dataclass(frozen=True, slots=True)
class CodeSetComponent:
    """CONV_FRAME::CodeSetComponent: a native code set and conversion sets."""

    native: int
    conversion: tuple[int, ...] = ()

    def _write(self, w: CDRWriter) -> None:
        w.ulong(self.native)
        w.ulong(len(self.conversion))
        for cs in self.conversion:
            w.ulong(cs)

    @classmethod
    def _read(cls, r: CDRReader) -> CodeSetComponent:
        native = r.ulong()
        return cls(native, tuple(r.sequence(CDRReader.ulong, min_item_size=4)))


@dataclass(frozen=True, slots=True)
class CodeSetsInfo:
    """CONV_FRAME::CodeSetComponentInfo, the data of a TAG_CODE_SETS component."""

    char: CodeSetComponent
    wchar: CodeSetComponent

    def encode(self, little_endian: bool = True) -> bytes:
        """The component data (an encapsulation)."""
        w = new_encapsulation(little_endian)
        self.char._write(w)
        self.wchar._write(w)
        return w.getvalue()

    @classmethod
    def decode(cls, data: bytes) -> CodeSetsInfo:
        """Parse component data; :class:`ProtocolError` when malformed."""
        r = open_encapsulation(data, "TAG_CODE_SETS")
        return cls(CodeSetComponent._read(r), CodeSetComponent._read(r))

    def to_component(self, little_endian: bool = True) -> TaggedComponent:
        return TaggedComponent(TAG_CODE_SETS, self.encode(little_endian))


DEFAULT_CODE_SETS = CodeSetsInfo(
    char=CodeSetComponent(CS_UTF8, (CS_ISO8859_1,)),
    wchar=CodeSetComponent(CS_UTF16, (CS_UTF16,)),
)
"""What pyorb servers advertise: UTF-8 strings (omniORB clients then transmit
UTF-8 rather than Latin-1) and UTF-16 wide strings (without a wchar code set
omniORB refuses to marshal wstring)."""


def orb_type_component(orb_type: int, little_endian: bool = True) -> TaggedComponent:
    """A TAG_ORB_TYPE component (an encapsulated ulong)."""
    w = new_encapsulation(little_endian)
    w.ulong(orb_type)
    return TaggedComponent(TAG_ORB_TYPE, w.getvalue())


def alternate_address_component(
    host: str, port: int, little_endian: bool = True
) -> TaggedComponent:
    """A TAG_ALTERNATE_IIOP_ADDRESS component (encapsulated host and port)."""
    w = new_encapsulation(little_endian)
    w.string(host)
    w.ushort(port)
    return TaggedComponent(TAG_ALTERNATE_IIOP_ADDRESS, w.getvalue())


@dataclass(frozen=True, slots=True)
class SSLComponent:
    """SSLIOP::SSL, the data of a TAG_SSL_SEC_TRANS component: the object's TLS
    port and the association options the target supports and requires.

    A target that requires :data:`TLS_PROTECTION` (any of its bits) takes no
    plain connections; its IIOP profile's own port is then 0, as omniORB,
    JacORB and TAO write it."""

    target_supports: int
    target_requires: int
    port: int

    @property
    def requires_tls(self) -> bool:
        return bool(self.target_requires & TLS_PROTECTION)

    @property
    def requires_client_certificate(self) -> bool:
        return bool(self.target_requires & ESTABLISH_TRUST_IN_CLIENT)

    def to_component(self, little_endian: bool = True) -> TaggedComponent:
        w = new_encapsulation(little_endian)
        w.ushort(self.target_supports)
        w.ushort(self.target_requires)
        w.ushort(self.port)
        return TaggedComponent(TAG_SSL_SEC_TRANS, w.getvalue())

    @classmethod
    def decode(cls, data: bytes) -> SSLComponent:
        r = open_encapsulation(data, "TAG_SSL_SEC_TRANS")
        return cls(r.ushort(), r.ushort(), r.ushort())


def ssl_component(port: int, *, required: bool, client_certificate: str = "none") -> SSLComponent:
    """What a server listening for TLS on ``port`` advertises.

    ``required``: it takes no plain connections.  ``client_certificate`` is
    ``"none"``, ``"optional"`` (verified when presented) or ``"required"``."""
    supports = TLS_PROTECTION | ESTABLISH_TRUST_IN_TARGET
    if client_certificate != "none":
        supports |= ESTABLISH_TRUST_IN_CLIENT
    if not required:
        supports |= NO_PROTECTION
    requires = TLS_PROTECTION if required else 0
    if client_certificate == "required":
        requires |= ESTABLISH_TRUST_IN_CLIENT
    return SSLComponent(supports, requires, port)


@dataclass(frozen=True, slots=True)
class GroupComponent:
    """FT-CORBA's TagFTGroupTaggedComponent: the object group a profile's
    object belongs to.  Every profile of a group reference carries the same
    one; ``version`` grows when the membership changes."""

    domain: str
    group_id: int
    version: int = 1

    def to_component(self, little_endian: bool = True) -> TaggedComponent:
        w = new_encapsulation(little_endian)
        w.octet(1)  # component_version: GIOP::Version 1.0
        w.octet(0)
        w.string(self.domain)
        w.ulonglong(self.group_id)
        w.ulong(self.version)
        return TaggedComponent(TAG_FT_GROUP, w.getvalue())

    @classmethod
    def decode(cls, data: bytes) -> GroupComponent:
        r = open_encapsulation(data, "TAG_FT_GROUP")
        r.octet()
        r.octet()
        return cls(r.string(), r.ulonglong(), r.ulong())


# --- profiles ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TaggedProfile:
    """A profile pyorb does not interpret, kept verbatim."""

    tag: int
    data: bytes

    def body(self) -> bytes:
        return self.data


@dataclass(frozen=True, slots=True)
class IIOPProfile:
    """A TAG_INTERNET_IOP profile.

    ``little_endian`` is the byte order of the profile's own encapsulation; it
    is remembered so that re-encoding reproduces the original bytes, and it is
    not part of equality (it does not change what the profile designates).
    """

    version: tuple[int, int]
    host: str
    port: int
    object_key: bytes
    components: tuple[TaggedComponent, ...] = ()
    little_endian: bool = field(default=True, compare=False)

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 0xFFFF:
            raise ValueError(f"port {self.port} out of range")
        if self.version[0] != 1 or not 0 <= self.version[1] <= 0xFF:
            raise ValueError(f"unsupported IIOP version {self.version}")
        if self.version == (1, 0) and self.components:
            raise ValueError("IIOP 1.0 profiles cannot carry tagged components")

    @property
    def tag(self) -> int:
        return TAG_INTERNET_IOP

    def component(self, tag: int) -> TaggedComponent | None:
        """The first component with ``tag``, if any."""
        return next((c for c in self.components if c.tag == tag), None)

    @property
    def code_sets(self) -> CodeSetsInfo | None:
        """The server's code sets; :class:`ProtocolError` if malformed."""
        c = self.component(TAG_CODE_SETS)
        return None if c is None else CodeSetsInfo.decode(c.data)

    @property
    def orb_type(self) -> int | None:
        """The TAG_ORB_TYPE value; :class:`ProtocolError` if malformed."""
        c = self.component(TAG_ORB_TYPE)
        return None if c is None else open_encapsulation(c.data, "TAG_ORB_TYPE").ulong()

    @property
    def alternate_addresses(self) -> tuple[tuple[str, int], ...]:
        """(host, port) of every TAG_ALTERNATE_IIOP_ADDRESS component."""
        return tuple(
            _read_address(c.data) for c in self.components if c.tag == TAG_ALTERNATE_IIOP_ADDRESS
        )

    @property
    def group(self) -> GroupComponent | None:
        """The TAG_FT_GROUP component; :class:`ProtocolError` if malformed."""
        c = self.component(TAG_FT_GROUP)
        return None if c is None else GroupComponent.decode(c.data)

    @property
    def ssl(self) -> SSLComponent | None:
        """The TAG_SSL_SEC_TRANS component; :class:`ProtocolError` if malformed."""
        c = self.component(TAG_SSL_SEC_TRANS)
        return None if c is None else SSLComponent.decode(c.data)

    def body(self) -> bytes:
        """The profile body (an encapsulation in ``little_endian`` order)."""
        w = new_encapsulation(self.little_endian)
        w.octet(self.version[0])
        w.octet(self.version[1])
        w.string(self.host)
        w.ushort(self.port)
        w.octets(self.object_key)
        if self.version[1] >= 1:
            w.ulong(len(self.components))
            for c in self.components:
                w.ulong(c.tag)
                w.octets(c.data)
        return w.getvalue()


Profile = Union[IIOPProfile, TaggedProfile]


def _read_address(data: bytes) -> tuple[str, int]:
    r = open_encapsulation(data, "TAG_ALTERNATE_IIOP_ADDRESS")
    host = r.string()
    return host, r.ushort()


def _read_component(r: CDRReader) -> TaggedComponent:
    tag = r.ulong()
    return TaggedComponent(tag, r.octets())


def _decode_profile(tag: int, data: bytes) -> Profile:
    if tag != TAG_INTERNET_IOP:
        return TaggedProfile(tag, data)
    r = open_encapsulation(data, "IIOP profile")
    major, minor = r.octet(), r.octet()
    if major != 1:
        # A future IIOP whose layout we cannot know: keep it untouched.
        return TaggedProfile(tag, data)
    host = r.string()
    port = r.ushort()
    key = r.octets()
    components: tuple[TaggedComponent, ...] = ()
    if minor >= 1:
        components = tuple(r.sequence(_read_component, min_item_size=8))
    # Trailing bytes are ignored, as IIOP 1.0 readers of newer profiles must.
    return IIOPProfile((major, minor), host, port, key, components, little_endian=data[0] == 1)


def _read_profile(r: CDRReader) -> Profile:
    tag = r.ulong()
    return _decode_profile(tag, r.octets())


# --- IOR -----------------------------------------------------------------------

_HEX = re.compile(r"[0-9A-Fa-f]*")


@dataclass(frozen=True, slots=True)
class IOR:
    """An object reference: a repository id and its profiles.

    ``little_endian`` is the byte order used by :meth:`to_string` for the
    outer encapsulation (remembered from :meth:`from_string`); it is not part
    of equality.
    """

    type_id: str
    profiles: tuple[Profile, ...]
    little_endian: bool = field(default=True, compare=False)

    @classmethod
    def nil(cls) -> IOR:
        """The nil reference: empty type id, no profiles."""
        return cls("", ())

    @property
    def is_nil(self) -> bool:
        # Without a profile there is nothing to talk to, whatever the type id.
        return not self.profiles

    @property
    def iiop(self) -> IIOPProfile | None:
        """The first IIOP profile, or None."""
        return next((p for p in self.profiles if isinstance(p, IIOPProfile)), None)

    @property
    def group(self) -> GroupComponent | None:
        """The object group this reference names (TAG_FT_GROUP in its first
        IIOP profile), or None for a single object; ProtocolError if malformed."""
        profile = self.iiop
        return None if profile is None else profile.group

    def encode(self, w: CDRWriter) -> None:
        """Write the IOR struct into a CDR stream (object reference, forward)."""
        w.string(self.type_id)
        w.ulong(len(self.profiles))
        for p in self.profiles:
            w.ulong(p.tag)
            w.octets(p.body())

    @classmethod
    def decode(cls, r: CDRReader) -> IOR:
        """Read the IOR struct from a CDR stream; :class:`ProtocolError` if malformed."""
        type_id = r.string()
        profiles = tuple(r.sequence(_read_profile, min_item_size=8))
        return cls(type_id, profiles, little_endian=r.little_endian)

    def to_bytes(self) -> bytes:
        """The IOR as an encapsulation (what ``IOR:`` hex-encodes)."""
        w = new_encapsulation(self.little_endian)
        self.encode(w)
        return w.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> IOR:
        """Inverse of :meth:`to_bytes` (trailing bytes are ignored, as omniORB does)."""
        return cls.decode(open_encapsulation(data, "IOR"))

    def to_string(self) -> str:
        """The stringified form, ``IOR:`` followed by lower-case hex."""
        return "IOR:" + self.to_bytes().hex()

    @classmethod
    def from_string(cls, s: str) -> IOR:
        """Parse ``IOR:<hex>`` (any case, surrounding whitespace allowed).

        Raises :class:`ProtocolError` when malformed, like any decoder of
        peer data; :func:`parse_reference` turns that into ``ValueError``.
        """
        s = s.strip()
        if s[:4].upper() != "IOR:":
            raise ProtocolError("stringified IOR does not start with 'IOR:'")
        digits = s[4:]
        if len(digits) % 2 or not _HEX.fullmatch(digits):
            raise ProtocolError("stringified IOR is not an even number of hex digits")
        return cls.from_bytes(bytes.fromhex(digits))


def build_ior(
    type_id: str,
    host: str,
    port: int,
    object_key: bytes,
    *,
    version: tuple[int, int] = (1, 2),
    code_sets: CodeSetsInfo | None = DEFAULT_CODE_SETS,
    orb_type: int | None = None,
    little_endian: bool = True,
    alternates: Sequence[tuple[str, int]] = (),
    ssl: SSLComponent | None = None,
) -> IOR:
    """An IOR with one IIOP profile, as a pyorb server publishes it.

    ``alternates`` are further addresses of the same object, written as
    TAG_ALTERNATE_IIOP_ADDRESS components (clients try them in order when
    ``host``:``port`` does not answer).  ``ssl`` advertises a TLS port
    (TAG_SSL_SEC_TRANS); ``port`` is 0 when the server takes no plain
    connections (and an alternate's port too).  IIOP 1.0 profiles carry no
    components, so ``code_sets``, ``orb_type``, ``alternates`` and ``ssl``
    are dropped for ``version=(1, 0)``.
    """
    tls_only = ssl is not None and ssl.requires_tls and version != (1, 0)
    _check_endpoint(host, port, version, tls_only)
    components: list[TaggedComponent] = []
    if version != (1, 0):
        if orb_type is not None:
            components.append(orb_type_component(orb_type, little_endian))
        if code_sets is not None:
            components.append(code_sets.to_component(little_endian))
        if ssl is not None:
            _check_endpoint(host, ssl.port, version)
            components.append(ssl.to_component(little_endian))
        for alt_host, alt_port in alternates:
            _check_endpoint(alt_host, alt_port, version, tls_only)
            components.append(alternate_address_component(alt_host, alt_port, little_endian))
    profile = IIOPProfile(version, host, port, object_key, tuple(components), little_endian)
    return IOR(type_id, (profile,), little_endian)


def group_ior(members: Sequence[IOR], group: GroupComponent, type_id: str | None = None) -> IOR:
    """One reference to an object group: every IIOP profile of every member,
    each tagged with ``group`` (TAG_FT_GROUP).

    Clients that know groups (pyorb) spread calls over the members.  Other
    ORBs see an ordinary multi-profile IOR and call the first profile;
    omniORB does not fail over to a second profile, but it does to the
    TAG_ALTERNATE_IIOP_ADDRESS components of the first.  So when every
    member serves the same object key (replicas activated under one fixed
    key, the usual case), each profile also lists the other members'
    addresses as alternates, after its own.  The members must implement one
    interface (``type_id``, by default the first member's).  IIOP 1.0
    profiles cannot carry components and are refused (ValueError).
    """
    if not members:
        raise ValueError("a group needs at least one member")
    chosen: list[IIOPProfile] = []
    for member in members:
        if member.is_nil:
            raise ValueError("a nil reference cannot be a group member")
        for profile in member.profiles:
            if not isinstance(profile, IIOPProfile):
                continue
            if profile.version == (1, 0):
                raise ValueError(f"{profile.host}:{profile.port}: an IIOP 1.0 profile cannot carry TAG_FT_GROUP")
            chosen.append(profile)
    if not chosen:
        raise ValueError("the members have no IIOP profile")
    tag = group.to_component()
    shared_key = len({p.object_key for p in chosen}) == 1
    profiles: list[Profile] = []
    for profile in chosen:
        kept = [c for c in profile.components if c.tag != TAG_FT_GROUP]
        if shared_key:
            own = {(profile.host, profile.port), *profile.alternate_addresses}
            others = [(p.host, p.port) for p in chosen if (p.host, p.port) not in own and p.port != 0]
            kept += [alternate_address_component(h, port, profile.little_endian) for h, port in dict.fromkeys(others)]
        profiles.append(replace(profile, components=(*kept, tag)))
    return IOR(type_id if type_id is not None else members[0].type_id, tuple(profiles))


def _check_endpoint(host: str, port: int, version: tuple[int, int], port_zero: bool = False) -> None:
    if not host:
        raise ValueError("empty host")
    if not (0 if port_zero else 1) <= port <= 0xFFFF:
        raise ValueError(f"port {port} out of range 1-65535")
    if version not in _IIOP_VERSIONS:
        raise ValueError(f"unsupported IIOP version {version} (pyorb speaks 1.0-1.2)")


# --- corbaloc ------------------------------------------------------------------

# RFC 2396 "unreserved": left as is when escaping an object key.
_UNRESERVED = frozenset(
    b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.!~*'()"
)
# Characters allowed unescaped in a key string ("uric" = reserved | unreserved).
_URIC = frozenset(chr(b) for b in _UNRESERVED) | frozenset(";/?:@&=+$,")
_VERSION = re.compile(r"([0-9]+)\.([0-9]+)@")
_HOSTNAME = re.compile(r"[A-Za-z0-9._-]+")
_PORT = re.compile(r":[0-9]{1,5}")


@dataclass(frozen=True, slots=True)
class CorbalocAddress:
    """One ``iiop`` address of a corbaloc URL."""

    version: tuple[int, int]
    host: str
    port: int = DEFAULT_CORBALOC_PORT


@dataclass(frozen=True, slots=True)
class Corbaloc:
    """A parsed ``corbaloc:`` URL (IIOP addresses only)."""

    addresses: tuple[CorbalocAddress, ...]
    object_key: bytes

    def to_ior(self, type_id: str = "") -> IOR:
        """An IOR with one IIOP profile per address and no components.

        Without a code-sets component a client falls back to ISO-8859-1 and no
        wchar, which is what the spec prescribes for URL-made references.
        """
        profiles = tuple(
            IIOPProfile(a.version, a.host, a.port, self.object_key) for a in self.addresses
        )
        return IOR(type_id, profiles)


def escape_key(key: bytes) -> str:
    """%-escape every byte of ``key`` outside the RFC 2396 unreserved set."""
    return "".join(chr(b) if b in _UNRESERVED else f"%{b:02X}" for b in key)


def unescape_key(text: str) -> bytes:
    """Decode a corbaloc key string; ``ValueError`` on a bad escape or character."""
    out = bytearray()
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "%":
            pair = text[i + 1 : i + 3]
            if len(pair) != 2 or not _HEX.fullmatch(pair):
                raise ValueError(f"corbaloc key: bad %-escape at position {i}")
            out.append(int(pair, 16))
            i += 3
            continue
        if ch not in _URIC:
            raise ValueError(f"corbaloc key: character {ch!r} must be %-escaped")
        out.append(ord(ch))
        i += 1
    return bytes(out)


def parse_corbaloc(url: str) -> Corbaloc:
    """Parse ``corbaloc:[iiop]:[x.y@]host[:port][,...]/key``.

    The default port is 2809 and the default version 1.0 (as the spec and
    omniORB say).  ``rir:`` and any other protocol raise ``ValueError``.
    """
    url = url.strip()
    # URL schemes and protocol ids are case-insensitive (RFC 3986).
    if url[:9].lower() != "corbaloc:":
        raise ValueError(f"not a corbaloc URL: {url!r}")
    addr_list, slash, key = url[9:].partition("/")
    if not slash:
        raise ValueError(f"corbaloc URL has no '/' and object key: {url!r}")
    addresses = tuple(_parse_address(a) for a in addr_list.split(","))
    return Corbaloc(addresses, unescape_key(key))


def _parse_address(text: str) -> CorbalocAddress:
    protocol, colon, rest = text.partition(":")
    protocol = protocol.lower()
    if not text:
        raise ValueError("corbaloc URL has an empty address")
    if protocol == "rir":
        raise ValueError("corbaloc 'rir:' addresses are not supported (no local ORB)")
    if not colon:
        raise ValueError(f"corbaloc address {text!r} lacks a protocol (':' or 'iiop:')")
    if protocol not in ("", "iiop"):
        raise ValueError(f"corbaloc protocol {protocol!r} is not supported (only iiop)")
    version, rest = _split_version(rest)
    host, port = _split_host_port(rest)
    return CorbalocAddress(version, host, port)


def _split_version(text: str) -> tuple[tuple[int, int], str]:
    m = _VERSION.match(text)
    if m is None:
        if "@" in text:
            raise ValueError(f"corbaloc address {text!r}: version must be 'major.minor@'")
        return (1, 0), text
    version = (int(m.group(1)), int(m.group(2)))
    if version not in _IIOP_VERSIONS:
        raise ValueError(f"corbaloc: unsupported IIOP version {version[0]}.{version[1]}")
    return version, text[m.end() :]


def _split_host_port(text: str) -> tuple[str, int]:
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise ValueError(f"corbaloc address {text!r}: missing ']'")
        host, rest = text[1:end], text[end + 1 :]
        _check_ipv6(host)
    else:
        host, colon, port_text = text.partition(":")
        rest = colon + port_text
        if not _HOSTNAME.fullmatch(host):
            raise ValueError(f"corbaloc address {text!r}: bad or missing host")
    if not rest:
        return host, DEFAULT_CORBALOC_PORT
    if not _PORT.fullmatch(rest):
        raise ValueError(f"corbaloc address {text!r}: bad port")
    port = int(rest[1:])
    if not 1 <= port <= 0xFFFF:
        raise ValueError(f"corbaloc address {text!r}: port {port} out of range 1-65535")
    return host, port


def _check_ipv6(host: str) -> None:
    try:
        ipaddress.IPv6Address(host)
    except ValueError:
        raise ValueError(f"corbaloc: {host!r} is not an IPv6 address") from None


def to_corbaloc(
    host: str, port: int, object_key: bytes, version: tuple[int, int] = (1, 2),
    alternates: Sequence[tuple[str, int]] = (),
) -> str:
    """``corbaloc:iiop:1.2@host:port[,iiop:1.2@alternate:port...]/key`` with the key %-escaped.

    The version is always written: without it a client assumes GIOP 1.0.
    """
    addresses = []
    for h, p in ((host, port), *alternates):
        _check_endpoint(h, p, version)
        shown = f"[{h}]" if ":" in h else h
        addresses.append(f"iiop:{version[0]}.{version[1]}@{shown}:{p}")
    return f"corbaloc:{','.join(addresses)}/{escape_key(object_key)}"


def parse_reference(text: str) -> IOR:
    """An IOR from ``IOR:...`` or ``corbaloc:...`` text; ``ValueError`` otherwise."""
    text = text.strip()
    scheme = text.partition(":")[0].lower()
    if scheme == "ior":
        try:
            return IOR.from_string(text)
        except ProtocolError as exc:
            raise ValueError(f"malformed IOR: {exc.reason}") from exc
    if scheme == "corbaloc":
        return parse_corbaloc(text).to_ior()
    if scheme == "corbaname":
        raise ValueError("corbaname: URLs need a naming service lookup; not handled here")
    raise ValueError(f"not an object reference (expected IOR: or corbaloc:): {text[:40]!r}")


__all__ = [
    "DEFAULT_CODE_SETS",
    "DEFAULT_CORBALOC_PORT",
    "IOR",
    "ORB_TYPE_OMNIORB",
    "TAG_ALTERNATE_IIOP_ADDRESS",
    "TAG_CODE_SETS",
    "TAG_INTERNET_IOP",
    "TAG_MULTIPLE_COMPONENTS",
    "TAG_ORB_TYPE",
    "CodeSetComponent",
    "CodeSetsInfo",
    "Corbaloc",
    "CorbalocAddress",
    "IIOPProfile",
    "Profile",
    "TaggedComponent",
    "TaggedProfile",
    "alternate_address_component",
    "build_ior",
    "escape_key",
    "orb_type_component",
    "parse_corbaloc",
    "parse_reference",
    "to_corbaloc",
    "unescape_key",
]
