"""``pyorb ior``: what an IOR or corbaloc URL says, as a table or as JSON."""

from __future__ import annotations

from typing import Any

from pyorb.giop import codesets
from pyorb.giop import ior as iors
from pyorb.giop.errors import ProtocolError

PROFILE_TAGS = {iors.TAG_INTERNET_IOP: "TAG_INTERNET_IOP", iors.TAG_MULTIPLE_COMPONENTS: "TAG_MULTIPLE_COMPONENTS"}
COMPONENT_TAGS = {
    iors.TAG_ORB_TYPE: "TAG_ORB_TYPE",
    iors.TAG_CODE_SETS: "TAG_CODE_SETS",
    2: "TAG_POLICIES",
    iors.TAG_ALTERNATE_IIOP_ADDRESS: "TAG_ALTERNATE_IIOP_ADDRESS",
    iors.TAG_SSL_SEC_TRANS: "TAG_SSL_SEC_TRANS",
    iors.TAG_FT_GROUP: "TAG_FT_GROUP",
    33: "TAG_CSI_SEC_MECH_LIST",
}
ORB_TYPES = {iors.ORB_TYPE_OMNIORB: "omniORB", 0x54414F00: "TAO", 0x4A414300: "JacORB"}


def printable(key: bytes) -> str:
    """Printable ASCII as is, every other byte as ``\\xNN``."""
    return "".join(chr(b) if 0x20 <= b < 0x7F and b != 0x5C else f"\\x{b:02x}" for b in key)


def describe(ior: iors.IOR) -> dict[str, Any]:
    """A JSON-compatible description of ``ior``."""
    return {"type_id": ior.type_id, "profiles": [_profile(p) for p in ior.profiles]}


def _profile(p: iors.Profile) -> dict[str, Any]:
    tag = {"tag": PROFILE_TAGS.get(p.tag, str(p.tag))}
    if not isinstance(p, iors.IIOPProfile):
        return {**tag, "data": p.data.hex()}
    return {
        **tag,
        "iiop_version": f"{p.version[0]}.{p.version[1]}",
        "host": p.host,
        "port": p.port,
        "object_key": printable(p.object_key),
        "object_key_hex": p.object_key.hex(),
        "corbaloc": _corbaloc(p),
        "byte_order": "little-endian" if p.little_endian else "big-endian",
        "components": [_component(c) for c in p.components],
    }


def _corbaloc(p: iors.IIOPProfile) -> str | None:
    try:
        return iors.to_corbaloc(p.host, p.port, p.object_key, p.version)
    except ValueError:  # port 0 or an IIOP version a URL cannot say
        return None


def _component(c: iors.TaggedComponent) -> dict[str, Any]:
    out: dict[str, Any] = {"tag": COMPONENT_TAGS.get(c.tag, f"0x{c.tag:08x}")}
    try:
        out.update(_component_value(c))
    except ProtocolError as exc:
        out.update(malformed=exc.reason, data=c.data.hex())
    return out


def _component_value(c: iors.TaggedComponent) -> dict[str, Any]:
    probe = iors.IIOPProfile((1, 2), "h", 1, b"", (c,))
    if c.tag == iors.TAG_CODE_SETS:
        cs = iors.CodeSetsInfo.decode(c.data)
        return {"char": _code_sets(cs.char), "wchar": _code_sets(cs.wchar)}
    if c.tag == iors.TAG_ORB_TYPE:
        value = probe.orb_type or 0
        return {"orb_type": f"{ORB_TYPES.get(value, 'unknown')} (0x{value:08x})"}
    if c.tag == iors.TAG_ALTERNATE_IIOP_ADDRESS:
        host, port = probe.alternate_addresses[0]
        return {"address": f"{host}:{port}"}
    if c.tag == iors.TAG_SSL_SEC_TRANS:
        offer = iors.SSLComponent.decode(c.data)
        return {"tls": f"port {offer.port}, {'required' if offer.requires_tls else 'offered'}"
                       f"{', client certificate required' if offer.requires_client_certificate else ''} "
                       f"(supports 0x{offer.target_supports:04x}, requires 0x{offer.target_requires:04x})"}
    if c.tag == iors.TAG_FT_GROUP:
        group = iors.GroupComponent.decode(c.data)
        return {"group": f"domain {group.domain!r}, id {group.group_id}, version {group.version}"}
    return {"data": c.data.hex()}


def _code_sets(c: iors.CodeSetComponent) -> dict[str, Any]:
    return {"native": codesets.code_set_name(c.native), "conversion": [codesets.code_set_name(x) for x in c.conversion]}


def table(ior: iors.IOR, source: str) -> Any:
    """A rich Table of :func:`describe`'s content."""
    from rich.table import Table

    t = Table(title=f"{source.split(':', 1)[0].upper()} reference", show_header=True, title_justify="left")
    t.add_column("field", style="bold")
    t.add_column("value", overflow="fold")
    info = describe(ior)
    t.add_row("type id", info["type_id"] or "(none: a corbaloc URL names no type)")
    if not info["profiles"]:
        t.add_row("profiles", "none (a nil reference)")
    for n, prof in enumerate(info["profiles"], 1):
        t.add_section()
        _profile_rows(t, n, prof)
    return t


def _profile_rows(t: Any, n: int, prof: dict[str, Any]) -> None:
    t.add_row(f"profile {n}", prof["tag"])
    if "data" in prof:
        t.add_row("  data", prof["data"])
        return
    for field in ("iiop_version", "host", "port", "object_key", "object_key_hex", "corbaloc", "byte_order"):
        t.add_row("  " + field.replace("_", " "), str(prof[field]) if prof[field] is not None else "-")
    for comp in prof["components"]:
        for label, value in _component_rows(comp):
            t.add_row(label, value)


def _component_rows(comp: dict[str, Any]) -> list[tuple[str, str]]:
    tag = comp["tag"]
    if "char" in comp:
        return [(f"  {tag} {kind}", _code_set_text(comp[kind])) for kind in ("char", "wchar")]
    if "malformed" in comp:
        return [(f"  {tag}", f"malformed ({comp['malformed']}): {comp['data']}")]
    value = comp.get("orb_type") or comp.get("address") or comp.get("tls") or comp.get("group") or comp.get("data", "")
    return [(f"  {tag}", value)]


def _code_set_text(c: dict[str, Any]) -> str:
    conv = ", ".join(c["conversion"]) or "none"
    return f"native {c['native']}; conversion {conv}"
