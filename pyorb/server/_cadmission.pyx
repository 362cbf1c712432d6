# cython: language_level=3, boundscheck=False, wraparound=False
"""Admission control's question on arrival in C: the compiled twin of ``Admission.refusal``.

While a server sheds, every request of a route with admission control is
judged on arrival, most of them to be refused: in Python seven frames
(``refusal``, ``_loop_lag``, ``LoopLag.current``, ``_arrival``,
``_oldest_age``, ``CoDel.observe``, ``_refuse``) of float arithmetic over
the control's slots, which cost a refused request more than reading it
and writing its reply.  This twin makes the same decision in one,
reading and writing the slots of :class:`~pyorb.server.admission.Admission`,
:class:`~pyorb.server.admission.CoDel` and
:class:`~pyorb.server.admission.LoopLag` at their offsets, and counts and
words the refusal as ``_refuse`` does, finding the same text object.
The uncommon steps go to the originals: a probe to (re)start or of
another loop, a cancelled call at the head of the queue, a refusal text
not made yet, a log line due.  It reads ``perf_counter`` from
``pyorb.server.admission`` at each call, as the original does, so a
clock put there (tests, the instruction benchmark) is the clock both use.
tests/test_admission_twin.py checks that both give the same answers and
leave the same state over random arrivals, starts and clocks.
"""

import _thread

from cpython.weakref cimport PyWeakref_GetObject
from libc.math cimport fabs, round as c_round

from pyorb.giop._cframing cimport _get, _put, _slot_offsets
from pyorb.server import admission as _admission
from pyorb.server.call.stats import Recorder

cdef object _Admission = _admission.Admission
cdef object _CoDel = _admission.CoDel
cdef object _LoopLag = _admission.LoopLag
_original = _Admission.refusal  # taken while the class still holds it
cdef object _loop_lag = _Admission._loop_lag
cdef object _oldest_age = _Admission._oldest_age
cdef object _refuse = _Admission._refuse
cdef object _cause = _Admission._cause
cdef dict _globals = vars(_admission)
cdef dict _SHOWN = _admission._SHOWN
cdef str _PREFIX = _admission.REFUSED
cdef Py_ssize_t _MAX_TEXTS = _admission.MAX_TEXTS
cdef double _LOG_PERIOD = _admission.LOG_PERIOD
cdef double _STALE_PACES = _admission.STALE_PACES
cdef str _AGE = "queue's age"
cdef str _EXPECTED = "expected wait"
cdef str _STANDING = "expected wait in a standing queue"
cdef str _PAST = "expected wait past the interval"
cdef str _LAG = "event loop's lag"

cdef tuple _A = _slot_offsets(_Admission, ("policy", "_stats", "_codel", "_lock", "_queued", "_backlog", "_probe",
                                           "_pace", "_paced_at", "_logged", "_unlogged", "_texts"))
cdef object _Policy = _admission.AdmissionPolicy
cdef tuple _PO = _slot_offsets(_Policy, ("interval", "limit"))
cdef tuple _C = _slot_offsets(_CoDel, ("target", "interval", "dropping", "_first_above", "_ended"))
cdef tuple _P = _slot_offsets(_LoopLag, ("_loop", "lag", "_due", "_asked", "_handle"))
cdef object _Recorder = Recorder
cdef tuple _S = _slot_offsets(_Recorder, ("lock", "shed"))
cdef bint _KNOWN = not (_A is None or _PO is None or _C is None or _P is None or _S is None)
cdef Py_ssize_t _A_POLICY, _A_STATS, _A_CODEL, _A_LOCK, _A_QUEUED, _A_BACKLOG, _A_PROBE, _A_PACE, _A_PACED_AT
cdef Py_ssize_t _A_LOGGED, _A_UNLOGGED, _A_TEXTS, _C_TARGET, _C_INTERVAL, _C_DROPPING, _C_FIRST_ABOVE, _C_ENDED
cdef Py_ssize_t _P_LOOP, _P_LAG, _P_DUE, _P_ASKED, _P_HANDLE, _S_LOCK, _S_SHED, _PO_INTERVAL, _PO_LIMIT
if _KNOWN:
    (_A_POLICY, _A_STATS, _A_CODEL, _A_LOCK, _A_QUEUED, _A_BACKLOG, _A_PROBE, _A_PACE, _A_PACED_AT, _A_LOGGED,
     _A_UNLOGGED, _A_TEXTS) = _A
    _C_TARGET, _C_INTERVAL, _C_DROPPING, _C_FIRST_ABOVE, _C_ENDED = _C
    _P_LOOP, _P_LAG, _P_DUE, _P_ASKED, _P_HANDLE = _P
    _S_LOCK, _S_SHED = _S
    _PO_INTERVAL, _PO_LIMIT = _PO

cdef object _LockType = _thread.LockType
# Called unbound: ``with lock`` looks up and binds __enter__ and __exit__ per call.
cdef object _acquire = _LockType.acquire
cdef object _release = _LockType.release


cdef double _lag(self, loop) except? -1.0:
    """As ``Admission._loop_lag``: the lag of ``loop``, through its probe."""
    probe = _get(self, True, _A_PROBE, "_probe")
    if probe is None or type(probe) is not _LoopLag or <object>PyWeakref_GetObject(
            _get(probe, True, _P_LOOP, "_loop")) is not loop or _get(probe, True, _P_HANDLE, "_handle") is None:
        return _loop_lag(self, loop)  # a probe to make or to start
    asked = loop.time()
    _put(probe, True, _P_ASKED, "_asked", asked)
    cdef double stalled = <double>asked - <double>_get(probe, True, _P_DUE, "_due")
    cdef double lag = _get(probe, True, _P_LAG, "lag")
    return stalled if stalled > lag else lag


cdef bint _observe(codel, double sojourn, double now) except -1:
    """As ``CoDel.observe``."""
    if type(codel) is not _CoDel:
        return codel.observe(sojourn, now)
    if sojourn < <double>_get(codel, True, _C_TARGET, "target"):
        if _get(codel, True, _C_FIRST_ABOVE, "_first_above") is not None:
            _put(codel, True, _C_FIRST_ABOVE, "_first_above", None)
        if _get(codel, True, _C_DROPPING, "dropping"):
            _put(codel, True, _C_DROPPING, "dropping", False)
            _put(codel, True, _C_ENDED, "_ended", now)
        return False
    first_above = _get(codel, True, _C_FIRST_ABOVE, "_first_above")
    if first_above is None:
        _put(codel, True, _C_FIRST_ABOVE, "_first_above", now + <double>_get(codel, True, _C_INTERVAL, "interval"))
    elif now >= <double>first_above:
        _put(codel, True, _C_DROPPING, "dropping", True)
    return _get(codel, True, _C_DROPPING, "dropping")


cdef bint _lately(codel, double now) except -1:
    """As ``CoDel.lately``."""
    if type(codel) is not _CoDel:
        return codel.lately(now)
    return _get(codel, True, _C_DROPPING, "dropping") or \
        now - <double>_get(codel, True, _C_ENDED, "_ended") < <double>_get(codel, True, _C_INTERVAL, "interval")


cdef double _stands_by(codel, double sojourn, double now) except? -1.0:
    """As ``CoDel.stands_by``."""
    if type(codel) is not _CoDel:
        return codel.stands_by(sojourn, now)
    first_above = _get(codel, True, _C_FIRST_ABOVE, "_first_above")
    if first_above is not None:
        return first_above
    cdef double short = <double>_get(codel, True, _C_TARGET, "target") - sojourn
    return now + (short if short > 0.0 else 0.0) + <double>_get(codel, True, _C_INTERVAL, "interval")


cdef double _oldest(self, double now) except? -1.0:
    """As ``Admission._oldest_age`` (its lock held) when the oldest queued call is not cancelled."""
    queued = _get(self, True, _A_QUEUED, "_queued")
    if not queued:
        return 0.0
    oldest = next(iter(queued))
    if oldest.done:
        return _oldest_age(self, now)  # drops the cancelled calls first
    return now - <double>oldest.queued_at


cdef tuple _arrival(self, double now, double lag, connection):
    """As ``Admission._arrival`` (its lock held): why the call must not be queued, and the wait that says so."""
    cdef double oldest = _oldest(self, now)
    cdef double age = oldest if oldest > lag else lag
    codel = _get(self, True, _A_CODEL, "_codel")
    cdef bint standing = codel is not None and _observe(codel, age, now)
    pace_value = _get(self, True, _A_PACE, "_pace")
    cdef double pace = 0.0, since
    policy = _get(self, True, _A_POLICY, "policy")
    cdef bint plain_policy = type(policy) is _Policy
    if pace_value is not None:
        pace = pace_value
        since = now - <double>_get(self, True, _A_PACED_AT, "_paced_at")
        if since > <double>_get(policy, plain_policy, _PO_INTERVAL, "interval") and since > _STALE_PACES * pace:
            pace_value = None  # no call started for several paces: the servants' speed may have changed since
    if pace_value is None:
        return (_AGE, age) if standing else None
    cdef dict backlog = _get(self, True, _A_BACKLOG, "_backlog")
    cdef Py_ssize_t queued = len(_get(self, True, _A_QUEUED, "_queued"))
    cdef Py_ssize_t turns = (<Py_ssize_t>backlog.get(connection, 0) + 1) * len(backlog)
    cdef double expected = lag + <double>(turns if turns < queued else queued) * pace
    limit = _get(policy, plain_policy, _PO_LIMIT, "limit")
    if limit is not None and expected >= <double>limit:
        return _EXPECTED, expected
    if codel is not None and expected >= <double>_get(codel, type(codel) is _CoDel, _C_TARGET, "target"):
        if _lately(codel, now):
            return _STANDING, expected
        if now + expected >= _stands_by(codel, age, now):
            return _PAST, expected
    return None


cdef str _refused(self, double waited, str why, double now):
    """As ``Admission._refuse``: counts the refusal and returns its text; the original when a
    log line is due or the text is not made yet."""
    stats = _get(self, True, _A_STATS, "_stats")
    if type(stats) is not _Recorder:
        return _refuse(self, waited, why)
    lock = _get(stats, True, _S_LOCK, "lock")
    if type(lock) is not _LockType:
        return _refuse(self, waited, why)
    cdef double scale = _SHOWN.get(why, 1000)
    cdef double x = waited * scale
    cdef double rounded = c_round(x)  # as round(x): halves to even
    if fabs(x - rounded) == 0.5:
        rounded = 2.0 * c_round(x / 2.0)
    key = (why, int(rounded))
    cdef dict texts = _get(self, True, _A_TEXTS, "_texts")
    text = texts.get(key)
    if text is None:
        return _refuse(self, waited, why)
    _acquire(lock)
    try:
        if now - <double>_get(self, True, _A_LOGGED, "_logged") >= _LOG_PERIOD:
            text = None  # a log line is due: the original counts, words and logs it
        else:
            _put(stats, True, _S_SHED, "shed", _get(stats, True, _S_SHED, "shed") + 1)
            _put(self, True, _A_UNLOGGED, "_unlogged", _get(self, True, _A_UNLOGGED, "_unlogged") + 1)
    finally:
        _release(lock)
    if text is None:
        return _refuse(self, waited, why)
    return text


def refusal(self, loop, queued, connection):
    """As :meth:`pyorb.server.admission.Admission.refusal`."""
    if not _KNOWN or type(self) is not _Admission:
        return _original(self, loop, queued, connection)
    codel = _get(self, True, _A_CODEL, "_codel")
    cdef bint dropping = codel is not None and (_get(codel, True, _C_DROPPING, "dropping") if type(codel) is _CoDel
                                                else codel.dropping)
    cdef double lag, now
    if queued:
        if _get(self, True, _A_PACE, "_pace") is None and not dropping:
            return None  # the queue never stood: the strategy judges the call, with its arguments read
        lag = _lag(self, loop)
        now = _globals["perf_counter"]()
        lock = _get(self, True, _A_LOCK, "_lock")
        if type(lock) is _LockType:
            _acquire(lock)
            try:
                refused = _arrival(self, now, lag, connection)
            finally:
                _release(lock)
        else:
            with lock:
                refused = _arrival(self, now, lag, connection)
        return None if refused is None else _refused(self, refused[1], refused[0], now)
    if not dropping:
        return None  # not shedding: the strategy judges the call, with its arguments read
    lag = _lag(self, loop)
    now = _globals["perf_counter"]()
    with _get(self, True, _A_LOCK, "_lock"):
        shed = _observe(codel, lag, now)
    return _refused(self, lag, _LAG, now) if shed else None
