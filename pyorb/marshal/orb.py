"""omniORB's C marshaler, the one place pyorb calls it.

``_omnipy.cdrMarshal``/``cdrUnmarshal`` in their raw (endian-flag) form
encode a value as if it started at stream offset 0; :mod:`pyorb.marshal.body`
handles where a GIOP body really starts.  ``CORBA.ORB_init`` must have run
once (with UTF-8 as the native char code set) before either is called.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import _omnipy
from omniORB import CORBA

Descriptor = Any
"""An omniidl type descriptor: an int for basic types, a tuple[Any, ...] otherwise."""

_init_lock = threading.Lock()
_orb: CORBA.ORB | None = None


def ensure_orb() -> CORBA.ORB:
    """Initialise omniORB once per process, with UTF-8 as native char set.

    The marshaler needs an initialised ORB.  If the application already
    initialised one, it is reused as it is.
    """
    global _orb
    if _orb is None:
        with _init_lock:
            if _orb is None:
                _orb = CORBA.ORB_init(["-ORBnativeCharCodeSet", "UTF-8"], CORBA.ORB_ID)
    return _orb


# The C functions themselves, typed: a Python wrapper around each cost a call per value on every call.
cdr_marshal: Callable[[Descriptor, Any, bool], bytes] = _omnipy.cdrMarshal
"""``cdr_marshal(desc, value, little_endian)``: the encoding of ``value`` at stream offset 0."""
cdr_unmarshal: Callable[[Descriptor, bytes, bool], Any] = _omnipy.cdrUnmarshal
"""``cdr_unmarshal(desc, data, little_endian)``: the value encoded in ``data`` from stream offset 0."""
