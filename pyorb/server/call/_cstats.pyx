# cython: language_level=3, boundscheck=False, wraparound=False
"""A call's statistics in C: the compiled twin of ``Recorder.finish``.

Every call a server answers is counted once by its operation's recorder,
from the loop thread or a dispatcher thread: in Python a frame around a
lock and five slot updates.  This twin makes the same updates under the
same lock, reading and writing the slots at their offsets, for a recorder
of exactly :class:`~pyorb.server.call.stats.Recorder`; any other goes to
the original.  tests/test_stats_twin.py checks that both leave the same
counts for the same calls.
"""

from pyorb.giop._cframing cimport _get, _put, _slot_offsets
from pyorb.server.call import stats as _stats

cdef object _Recorder = _stats.Recorder
_original = _Recorder.finish  # taken while the class still holds it
cdef tuple _OFFSETS = _slot_offsets(_Recorder, ("lock", "served", "wait_total", "service_total", "failed", "samples"))
cdef Py_ssize_t _LOCK, _SERVED, _WAIT, _SERVICE, _FAILED, _SAMPLES
if _OFFSETS is not None:
    _LOCK, _SERVED, _WAIT, _SERVICE, _FAILED, _SAMPLES = _OFFSETS


def finish(self, wait, service, failed):
    """As :meth:`pyorb.server.call.stats.Recorder.finish`."""
    if _OFFSETS is None or type(self) is not _Recorder:
        return _original(self, wait, service, failed)
    with _get(self, True, _LOCK, "lock"):
        _put(self, True, _SERVED, "served", _get(self, True, _SERVED, "served") + 1)
        _put(self, True, _WAIT, "wait_total", _get(self, True, _WAIT, "wait_total") + wait)
        _put(self, True, _SERVICE, "service_total", _get(self, True, _SERVICE, "service_total") + service)
        if failed:
            _put(self, True, _FAILED, "failed", _get(self, True, _FAILED, "failed") + 1)
        _get(self, True, _SAMPLES, "samples").append((wait, service))
