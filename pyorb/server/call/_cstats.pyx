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

import _thread

from pyorb.giop._cframing cimport _get, _put, _slot_offsets
from pyorb.server.call import stats as _stats

cdef object _Recorder = _stats.Recorder
_original = _Recorder.finish  # taken while the class still holds it
cdef tuple _OFFSETS = _slot_offsets(_Recorder, ("lock", "served", "wait_total", "service_total", "failed", "waits",
                                                "services"))
cdef Py_ssize_t _LOCK, _SERVED, _WAIT, _SERVICE, _FAILED, _WAITS, _SERVICES
if _OFFSETS is not None:
    _LOCK, _SERVED, _WAIT, _SERVICE, _FAILED, _WAITS, _SERVICES = _OFFSETS


cdef object _LockType = _thread.LockType
# Called unbound: ``with lock`` looks up and binds __enter__ and __exit__ per call.
cdef object _acquire = _LockType.acquire
cdef object _release = _LockType.release


cdef int _count(self, wait, service, failed) except -1:
    """The recorder's updates for one call; the caller holds its lock."""
    _put(self, True, _SERVED, "served", _get(self, True, _SERVED, "served") + 1)
    _put(self, True, _WAIT, "wait_total", _get(self, True, _WAIT, "wait_total") + wait)
    _put(self, True, _SERVICE, "service_total", _get(self, True, _SERVICE, "service_total") + service)
    if failed:
        _put(self, True, _FAILED, "failed", _get(self, True, _FAILED, "failed") + 1)
    _get(self, True, _WAITS, "waits").append(wait)
    _get(self, True, _SERVICES, "services").append(service)
    return 0


def finish(self, wait, service, failed):
    """As :meth:`pyorb.server.call.stats.Recorder.finish`."""
    if _OFFSETS is None or type(self) is not _Recorder:
        return _original(self, wait, service, failed)
    lock = _get(self, True, _LOCK, "lock")
    if type(lock) is not _LockType:
        with lock:
            _count(self, wait, service, failed)
        return
    _acquire(lock)
    try:
        _count(self, wait, service, failed)
    finally:
        _release(lock)
