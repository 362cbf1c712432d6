"""Marshaling: Python values to CDR bodies and back, through omniORBpy's C marshaler.

* :mod:`pyorb.marshal.orb`: omniORB's marshaler, the only place it is called.
* :mod:`pyorb.marshal.body`: whole bodies (:class:`BodyCodec`,
  :class:`Operation`): alignment per GIOP version, char code sets, the
  GIOP 1.1 wide form, zeroed padding.
* :mod:`pyorb.marshal.references`: object references at every depth of a value.
* :mod:`pyorb.marshal.values`: walking a value by its descriptor (for references and wide text).
* :mod:`pyorb.marshal.exceptions`: system exceptions in Reply bodies.
* :mod:`pyorb.marshal.wide`: wide text omniORBpy reads wrongly or lacks.
* :mod:`pyorb.marshal.layout`: walking encodings by type (zeroing padding,
  realigning GIOP 1.1 fragments, re-encoding strings, bounding what
  untrusted bodies may hold); it imports neither omniORB nor the rest.

The names below load their modules on first use, so importing
``pyorb.marshal.layout`` (the configuration does) does not load omniORB.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyorb._lazy import lazy_names

if TYPE_CHECKING:
    from pyorb.marshal.body import BodyCodec as BodyCodec
    from pyorb.marshal.body import Operation as Operation
    from pyorb.marshal.exceptions import pack_system_exception as pack_system_exception
    from pyorb.marshal.exceptions import system_exception_class as system_exception_class
    from pyorb.marshal.exceptions import unpack_system_exception as unpack_system_exception
    from pyorb.marshal.orb import Descriptor as Descriptor
    from pyorb.marshal.orb import ensure_orb as ensure_orb
    from pyorb.marshal.references import ObjrefConverter as ObjrefConverter
    from pyorb.marshal.references import from_omni as from_omni
    from pyorb.marshal.references import set_objref_hook as set_objref_hook
    from pyorb.marshal.references import to_omni as to_omni

_EXPORTS = {
    "BodyCodec": "pyorb.marshal.body",
    "Operation": "pyorb.marshal.body",
    "pack_system_exception": "pyorb.marshal.exceptions",
    "system_exception_class": "pyorb.marshal.exceptions",
    "unpack_system_exception": "pyorb.marshal.exceptions",
    "Descriptor": "pyorb.marshal.orb",
    "ensure_orb": "pyorb.marshal.orb",
    "ObjrefConverter": "pyorb.marshal.references",
    "from_omni": "pyorb.marshal.references",
    "set_objref_hook": "pyorb.marshal.references",
    "to_omni": "pyorb.marshal.references",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_names(__name__, _EXPORTS)
