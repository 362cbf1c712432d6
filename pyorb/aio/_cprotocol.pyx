# cython: language_level=3, boundscheck=False, wraparound=False
"""A connection's reads and writes in C: the compiled twins of ``GIOPProtocol``'s
``data_received``, ``_process``, ``send`` and ``_flush``.

Every call crosses these four methods twice (a request read and a reply
written on the server, the request written and the reply read on the
client): in Python that is some twenty slot reads and writes per method
around the core's compiled framing.  These twins do the same steps in C,
reading and writing the connection's slots at their offsets; the rare
branches (a batch that must yield, a protocol error, a partial message to
time) call the same Python methods the originals call.  A connection of a
class whose slots or methods are not GIOPProtocol's own (a subclass that
overrides one) goes to the Python originals whole.
tests/aio/test_protocol_twins.py checks that both leave the same state and
make the same calls for the same reads and writes.
"""

from pyorb.aio import flow as _flow
from pyorb.aio import protocol as _protocol
from pyorb.giop._cframing cimport _get, _put, _slot_offsets
from pyorb.giop.connection import GIOPConnection
from pyorb.giop.errors import ProtocolError
from pyorb.giop.messages import CLOSED, NEED_DATA

# The originals, taken while the class still holds them (this module is
# imported by the first of the four twin declarations).
cdef object _Protocol = _protocol.GIOPProtocol
_original_data_received = _Protocol.data_received
_original_process = _Protocol._process
_original_send = _Protocol.send
_original_flush = _Protocol._flush
cdef dict _protocol_globals = vars(_protocol)  # BATCH, read per batch as the original reads it
cdef object _NEED_DATA = NEED_DATA
cdef object _CLOSED = CLOSED
cdef object _ProtocolError = ProtocolError

# The connection's slots, at their offsets (see _by_offset).
cdef tuple _NAMES = ("_closing", "loop", "last_activity", "core", "reading", "handler", "_flush_pending", "_wrote",
                     "_out", "_out_bytes", "reassembly_bytes", "_read_timer", "_train_timer", "transport",
                     "write_paused", "direct_writer", "config")
cdef tuple _OFFSETS = _slot_offsets(_Protocol, _NAMES)
cdef tuple _DESCRS = None if _OFFSETS is None else tuple(_Protocol.__dict__[name] for name in _NAMES)
cdef Py_ssize_t _CLOSING, _LOOP, _LAST, _CORE, _READING, _HANDLER, _PENDING, _WROTE, _OUT, _OUT_BYTES
cdef Py_ssize_t _REASSEMBLY, _READ_TIMER, _TRAIN_TIMER, _TRANSPORT, _PAUSED, _DIRECT, _CONFIG
if _OFFSETS is not None:
    (_CLOSING, _LOOP, _LAST, _CORE, _READING, _HANDLER, _PENDING, _WROTE, _OUT, _OUT_BYTES,
     _REASSEMBLY, _READ_TIMER, _TRAIN_TIMER, _TRANSPORT, _PAUSED, _DIRECT, _CONFIG) = _OFFSETS

# The core's slots this module reads, for a core of exactly GIOPConnection, and its two
# per-read methods called as functions (the framing twins when the accelerator runs).
cdef object _Conn = GIOPConnection
cdef tuple _CORE_OFFSETS = _slot_offsets(GIOPConnection, ("_buf", "_trains", "reassembly_bytes"))
cdef Py_ssize_t _C_BUF, _C_TRAINS, _C_REASSEMBLY
if _CORE_OFFSETS is not None:
    _C_BUF, _C_TRAINS, _C_REASSEMBLY = _CORE_OFFSETS
cdef object _receive_data = GIOPConnection.receive_data
cdef object _next_event = GIOPConnection.next_event

cdef object _Gate = _flow.ReadGate
cdef tuple _GATE_OFFSETS = _slot_offsets(_flow.ReadGate, ("closed",))
cdef Py_ssize_t _G_CLOSED = -1 if _GATE_OFFSETS is None else _GATE_OFFSETS[0]

cdef dict _classes = {}  # a connection class -> whether its instances run the twins' own code


cdef object _lookup(cls, str name):
    """What ``cls.<name>`` resolves to through its MRO, unbound (None if nothing)."""
    for klass in cls.__mro__:
        found = vars(klass).get(name)
        if found is not None:
            return found
    return None


cdef bint _by_offset(obj) except -1:
    """Whether ``obj``'s connection slots are GIOPProtocol's own (read at their offsets) and its
    ``_process`` and ``_flush`` are these twins: checked once per class.  A class that hides a
    slot behind a property, or overrides one of the methods, runs the Python originals."""
    cls = type(obj)
    known = _classes.get(cls)
    if known is None:
        known = _DESCRS is not None and all(_lookup(cls, name) is descr for name, descr in zip(_NAMES, _DESCRS)) \
            and _lookup(cls, "_process") is _process and _lookup(cls, "_flush") is _flush
        _classes[cls] = known
    return known


def data_received(self, data):
    """As :meth:`pyorb.aio.protocol.GIOPProtocol.data_received`."""
    if not _by_offset(self):
        return _original_data_received(self, data)
    if _get(self, True, _CLOSING, "_closing"):
        return
    _put(self, True, _LAST, "last_activity", _get(self, True, _LOOP, "loop").time())
    core = _get(self, True, _CORE, "core")
    if type(core) is _Conn:
        _receive_data(core, data)
    else:
        core.receive_data(data)
    _run(self)


def _process(self):
    """As :meth:`pyorb.aio.protocol.GIOPProtocol._process`."""
    if not _by_offset(self):
        return _original_process(self)
    _run(self)


cdef int _run(self) except -1:
    """``_process``'s body, for a connection whose slots are read at their offsets."""
    core = _get(self, True, _CORE, "core")
    cdef bint core_fast = type(core) is _Conn and _CORE_OFFSETS is not None
    gate = _get(self, True, _READING, "reading")
    cdef bint gate_fast = type(gate) is _Gate and _G_CLOSED >= 0
    receive = _get(self, True, _HANDLER, "handler").message_received
    batch = _protocol_globals["BATCH"]
    _put(self, True, _PENDING, "_flush_pending", True)  # replies made while handling this batch go out together
    handled = 0
    try:
        while not _get(gate, gate_fast, _G_CLOSED, "closed"):
            if handled == batch:
                self._yield_turn()
                break
            event = _next_event(core) if core_fast else core.next_event()
            if event is _NEED_DATA or event is _CLOSED:
                break
            handled += 1
            receive(event)
    except _ProtocolError as exc:
        self._protocol_error(exc)
    finally:
        if _get(self, True, _OUT, "_out"):
            _write_out(self)
        else:
            _put(self, True, _PENDING, "_flush_pending", False)
            _put(self, True, _WROTE, "_wrote", False)
    held = _get(core, core_fast, _C_REASSEMBLY, "reassembly_bytes")
    reported = _get(self, True, _REASSEMBLY, "reassembly_bytes")
    if held != reported:
        _put(self, True, _REASSEMBLY, "reassembly_bytes", held)
        _get(self, True, _HANDLER, "handler").reassembly_changed(held - reported)
    if handled and _get(self, True, _READ_TIMER, "_read_timer") is not None:
        self._cancel_read_timer()
    if (_get(core, core_fast, _C_BUF, "_buf") or _get(core, core_fast, _C_TRAINS, "_trains")
            or _get(self, True, _READ_TIMER, "_read_timer") is not None
            or _get(self, True, _TRAIN_TIMER, "_train_timer") is not None):
        self._watch_partial()
    return 0


def send(self, data):
    """As :meth:`pyorb.aio.protocol.GIOPProtocol.send`."""
    if not _by_offset(self):
        return _original_send(self, data)
    if _get(self, True, _CLOSING, "_closing"):
        return False
    if not (_get(self, True, _PENDING, "_flush_pending") or _get(self, True, _WROTE, "_wrote")
            or _get(self, True, _OUT, "_out") or _get(self, True, _PAUSED, "write_paused")) \
            and _get(self, True, _DIRECT, "direct_writer") is None:
        # Outside a batch, with nothing queued: written now (see the original).
        transport = _get(self, True, _TRANSPORT, "transport")
        if transport is not None and len(data) < _get(self, True, _CONFIG, "config").write_buffer_limit:
            _put(self, True, _WROTE, "_wrote", True)
            transport.write(data)
            return True
    _get(self, True, _OUT, "_out").append(data)
    queued = _get(self, True, _OUT_BYTES, "_out_bytes") + len(data)
    _put(self, True, _OUT_BYTES, "_out_bytes", queued)
    if queued >= _get(self, True, _CONFIG, "config").write_buffer_limit:
        pending = _get(self, True, _PENDING, "_flush_pending")
        _write_out(self)
        _put(self, True, _PENDING, "_flush_pending", pending)
        return True
    if not _get(self, True, _PENDING, "_flush_pending"):
        if _get(self, True, _WROTE, "_wrote"):
            _put(self, True, _PENDING, "_flush_pending", True)
            _get(self, True, _LOOP, "loop").call_soon(self._flush)
        else:
            _write_out(self)
            _put(self, True, _WROTE, "_wrote", True)
    return True


def _flush(self):
    """As :meth:`pyorb.aio.protocol.GIOPProtocol._flush`."""
    if not _by_offset(self):
        return _original_flush(self)
    _write_out(self)


cdef int _write_out(self) except -1:
    """``_flush``'s body, for a connection whose slots are read at their offsets."""
    _put(self, True, _PENDING, "_flush_pending", False)
    _put(self, True, _WROTE, "_wrote", False)
    out = _get(self, True, _OUT, "_out")
    if not out:
        return 0
    transport = _get(self, True, _TRANSPORT, "transport")
    if transport is None:
        return 0
    if _get(self, True, _PAUSED, "write_paused"):
        _get(self, True, _HANDLER, "handler").output_held()
        return 0
    data = out[0] if len(out) == 1 else b"".join(out)
    out.clear()  # the same list again: no new one per flush
    _put(self, True, _OUT_BYTES, "_out_bytes", 0)
    direct = _get(self, True, _DIRECT, "direct_writer")
    if direct is None:
        transport.write(data)
    else:
        direct.write_through(data)
    return 0


def runs_compiled(conn):
    """Whether ``conn``'s reads and writes run the twins' own code (else the Python originals)."""
    return _by_offset(conn)
