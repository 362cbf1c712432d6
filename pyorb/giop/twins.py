"""The core's twins: each C twin of `_cframing` declared to the registry, and the contract they read.

``pyorb.giop`` calls :func:`install` once, after its modules are loaded.
With the compiled accelerator (:mod:`pyorb._accelerator`), every binding of
a Python original in the core's modules is replaced by its C twin from
:mod:`pyorb.giop._cframing`: module globals (the function's home and the
modules that imported it by name) and ``GIOPConnection``'s per-read methods.
Modules outside the core import after ``pyorb.giop`` has run this, so they
bind the twins.  Without it, nothing changes and the originals run.  Each
twin is declared through :func:`pyorb._accelerator.twin`, the one way every
twin of pyorb takes its original's place, which keeps the original
(``_accelerator.TWINS``; tests/giop/test_cframing.py checks each twin gives
what its original gives).  :data:`ORIGINALS` names them by their names in
``_cframing``, which reads it to fall back to an original.  :data:`CONNECTION_STATE`
and :data:`MODULE_NAMES` are the contract between the compiled module and
the Python side: the private state and module names the twins read or
write.  tests/giop/test_twins.py fails if one is renamed on either side.
"""

from __future__ import annotations

from types import ModuleType
from typing import Callable

from pyorb import _accelerator
from pyorb.giop import codec, connection, fast12, header, messages
from pyorb.giop.connection import GIOPConnection


ORIGINALS: dict[str, Callable[..., object]] = {
    "parse_header": header.parse_header,
    "_decode_request_12_fast": fast12._decode_request_12_fast,
    "_decode_reply_12_fast": fast12._decode_reply_12_fast,
    "encode_reply_12": fast12.encode_reply_12,
    "encode_request_12": fast12.encode_request_12,
    "encode_request_12_contexts": fast12.encode_request_12_contexts,
    "_next_common": connection._next_common,
    "GIOPConnection.next_event": GIOPConnection.next_event,
    "GIOPConnection.receive_data": GIOPConnection.receive_data,
}
"""The Python originals of the functions with C twins, by the twin's name in ``_cframing``
(a method's name there drops the class)."""

CONNECTION_STATE: tuple[str, ...] = (
    "_buf",
    "_pos",
    "_header",
    "_trains",
    "_receives",
    "_error",
    "_eof",
    "max_message_size",
    "code_sets_chosen",
    "peer_version",
    "peer_little_endian",
)
"""The slots of ``GIOPConnection`` the twins read or write."""

MODULE_NAMES: dict[str, tuple[str, ...]] = {
    "header": ("Header", "KEY_ADDR", "_HEADER_TABLE", "parse_header"),
    "fast12": (
        "_REPLY_FIELDS",
        "_REPLY_STATUSES",
        "_REQUEST_FIELDS",
        "_build_reply",
        "_build_request",
        "_decode_request_12_fast",
        "encode_reply_12",
        "encode_request_12",
        "encode_request_12_contexts",
    ),
    "messages": ("GIOP_1_2", "MsgType", "NEED_DATA", "Reply", "Request", "ServiceContext"),
    "twins": ("ORIGINALS",),
}
"""The names the twins read from each module of the core, at their import or on first need."""

# The modules whose globals may hold an original; nothing else in the core binds one.
_MODULES: tuple[ModuleType, ...] = (header, fast12, codec, connection)
# Where each original is defined.
_HOMES: dict[str, ModuleType] = {name: next(m for m in _MODULES if m.__name__ == f.__module__)
                                 for name, f in ORIGINALS.items()}


def broken_contract() -> list[str]:
    """The names the twins expect that the Python side lacks (empty when the contract holds)."""
    slots = set(getattr(GIOPConnection, "__slots__", ()))
    missing = [f"GIOPConnection.{name}" for name in CONNECTION_STATE if name not in slots]
    modules = {"header": header, "fast12": fast12, "messages": messages, "twins": None}
    for module_name, names in MODULE_NAMES.items():
        module = modules[module_name]
        missing += [f"{module_name}.{name}" for name in names if module is not None and not hasattr(module, name)]
    return missing


def install() -> bool:
    """Declare the core's twins (:func:`pyorb._accelerator.twin`), which puts them in place of their
    originals if the accelerator is in use and the contract holds; whether they are in place.

    ``pyorb.giop`` calls it once; a later call declares nothing again, and says whether the twins
    would be used now."""
    missing = broken_contract() if _accelerator.status().compiled else []
    if missing:
        import logging  # only here: importing the core must not load logging (and threading with it)

        logging.getLogger(__name__).warning(
            "the compiled GIOP twins are not used: they read %s, which the Python side no longer has", ", ".join(missing))
    keys = {name: f"{_HOMES[name].__name__}.{name}" for name in ORIGINALS}
    # The first declaration imports _cframing before anything is replaced: it keeps the originals it falls back to.
    for name, key in keys.items():
        if key not in _accelerator.TWINS:
            _accelerator.twin(_HOMES[name].__name__, name, "pyorb.giop._cframing", also=[m.__name__ for m in _MODULES],
                              usable=not missing)
    return not missing and all(_accelerator.TWINS[key].in_place for key in keys.values())


__all__ = ["CONNECTION_STATE", "MODULE_NAMES", "ORIGINALS", "broken_contract", "install"]
