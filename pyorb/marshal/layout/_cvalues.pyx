# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""The value walk in C: the compiled twin of ``_Value.zero`` over a run of values (``_Value.zero_many``).

A sequence of small values is the common value-type body, and the Python
walk spends microseconds on each value's tag, chunk and end tag.  This
walks the same run over the buffer's bytes: nulls, indirections (checked
against the values and repository ids that started earlier, here or in the
frame's table), value tags with a codebase URL, one repository id or a list
of them (indirections included), a derived or truncated type found by the
node's ``find``, unchunked states or a chunked state in one chunk followed
by its end tag (the rest of a truncated value skipped), each state walked by
its flat plan, compiled into C arrays once per plan (the steps of
``_cwalk._walk``).  The nesting bound is the frame's.

Anything else (a state that is not flat, a state split across chunks, a
run inside a chunked value) and anything wrong with the data gives -1 and
the frame untouched but for padding zeroed: the Python walk then walks the
run again from its start and gives the result or raises the error, so the
errors are its own.  On success the run's value and repository id starts
go into the frame's table, as the Python walk leaves them, unless the run
ends the data: then nothing after it can name them, and the table is left
as it was (a sequence of values that is a whole body, the common case,
costs no Python object per value).
"""

from cpython.buffer cimport PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport int32_t, uint8_t, uint32_t
from libc.string cimport memcmp

from pyorb.marshal.layout._cwalk cimport _u32

# The layout package is half-imported when valuetypes imports this module: its names are read when used.
from pyorb.marshal import layout as _layout
from pyorb.marshal.layout import valuetypes as _valuetypes
from pyorb.marshal.layout.nodes import _Array, _Counted, _Group, _Prim, _Struct

cdef uint32_t _INDIRECTION = 0xFFFFFFFF
cdef uint32_t _TAG_MIN = 0x7FFFFF00
cdef uint32_t _TAG_MAX = 0x7FFFFFFF
cdef uint32_t _END_TAG_MIN = 0x80000000  # (typed: a bare literal this large is compared as a Python int)

cdef enum:
    _VALUE = 1
    _REPO_ID = 2
    _REPO_IDS = 3
    _CODEBASE_URL = 4
    _MAX_IDS = 16  # a longer repository id list is left to the Python walk
    _MAX_STEPS = 4096  # a state of more primitives is split across chunks by the Python walk

# The frame table's names for each kind of start, as the Python walk writes them.
cdef tuple _KINDS = (None, _valuetypes._VALUE, _valuetypes._REPO_ID, _valuetypes._REPO_IDS,
                     _valuetypes._CODEBASE_URL)


cdef struct _Walk:
    uint8_t* d
    Py_ssize_t end
    Py_ssize_t sh
    bint le
    Py_ssize_t* offs  # the starts this run recorded, in increasing order
    uint8_t* kinds
    Py_ssize_t n
    Py_ssize_t cap


cdef inline Py_ssize_t _ulong(_Walk* w, Py_ssize_t i, uint32_t* out) noexcept:
    """The index after the aligned ulong at or after ``i`` (its padding zeroed), or -1 past the end."""
    cdef Py_ssize_t j = i + ((-(i + w.sh)) & 3)
    if j + 4 > w.end:
        return -1
    while i < j:
        w.d[i] = 0
        i += 1
    out[0] = _u32(w.d + j, w.le)
    return j + 4


cdef inline bint _record(_Walk* w, Py_ssize_t at, uint8_t kind) noexcept:
    if w.n >= w.cap or (w.n and w.offs[w.n - 1] >= at):
        return False
    w.offs[w.n] = at
    w.kinds[w.n] = kind
    w.n += 1
    return True


cdef bint _named(_Walk* w, Py_ssize_t target, uint8_t kind, dict table) except -1:
    """Whether a ``kind`` started at ``target``: recorded by this run, else in the frame's table."""
    cdef Py_ssize_t lo = 0, hi = w.n, mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if w.offs[mid] < target:
            lo = mid + 1
        else:
            hi = mid
    if lo < w.n and w.offs[lo] == target:
        return w.kinds[lo] == kind
    return table.get(target) == _KINDS[kind]


cdef Py_ssize_t _indirection(_Walk* w, Py_ssize_t i, uint8_t kind, dict table, Py_ssize_t* target) except -2:
    """After an indirection marker at ``i - 4``: the index after its offset (``target[0]`` where it
    points), or -1 if it names no ``kind`` that started before the marker."""
    cdef uint32_t offset
    cdef Py_ssize_t j = _ulong(w, i, &offset)
    if j < 0:
        return -1
    target[0] = j - 4 + <int32_t>offset
    if target[0] >= i - 4 or not _named(w, target[0], kind, table):
        return -1
    return j


cdef inline Py_ssize_t _string(_Walk* w, Py_ssize_t at) noexcept:
    """The index after the NUL-terminated string whose (aligned) count is at ``at``, or -1."""
    cdef Py_ssize_t count = _u32(w.d + at, w.le)
    cdef Py_ssize_t j = at + 4
    if count == 0 or count > w.end - j or w.d[j + count - 1] != 0:
        return -1
    return j + count


cdef Py_ssize_t _repo_id(_Walk* w, Py_ssize_t i, Py_ssize_t* at, bint record, dict table) except -2:
    """After the repository id (or indirection to one) at or after ``i``, or -1; ``at[0]`` is where its count is."""
    cdef uint32_t head
    cdef Py_ssize_t j = _ulong(w, i, &head)
    if j < 0:
        return -1
    if head == _INDIRECTION:
        return _indirection(w, j, _REPO_ID, table, at)
    if record and not _record(w, j - 4, _REPO_ID):
        return -1
    at[0] = j - 4
    return _string(w, j - 4)


cdef Py_ssize_t _repo_ids(_Walk* w, Py_ssize_t i, Py_ssize_t* ids, Py_ssize_t* nids, bint record,
                          dict table) except -2:
    """After a repository id list (or indirection to one) at or after ``i``, or -1; its ids' counts in ``ids``."""
    cdef uint32_t count
    cdef Py_ssize_t j = _ulong(w, i, &count), k, target, m
    if j < 0:
        return -1
    if count == _INDIRECTION:
        k = _indirection(w, j, _REPO_IDS, table, &target)
        # Read again where it started, as the Python walk does (its starts are recorded already).
        return k if k >= 0 and _repo_ids(w, target, ids, nids, False, table) >= 0 else -1
    if count == 0 or count > (w.end - j) // 5 or count > _MAX_IDS:
        return -1
    if record and not _record(w, j - 4, _REPO_IDS):
        return -1
    for m in range(count):
        j = _repo_id(w, j, &ids[m], record, table)
        if j < 0:
            return -1
    nids[0] = count
    return j


cdef object _actual(_Walk* w, object node, object own_id, Py_ssize_t* ids, Py_ssize_t nids, bint* truncated):
    """The node of the value the repository ids name (``_Value._actual``), or None if none is known here."""
    cdef Py_ssize_t k, at, n
    cdef object found
    for k in range(nids):
        at = ids[k]
        n = <Py_ssize_t>_u32(w.d + at, w.le) - 1
        if own_id is not None and n == len(own_id) and memcmp(w.d + at + 4, <const char*>own_id, n) == 0:
            found = node
        elif node.box:
            found = None
        else:
            found = node.find(PyBytes_FromStringAndSize(<char*>w.d + at + 4, n).decode("latin-1"))
        if found is not None:
            truncated[0] = k > 0
            return found
    return None


cdef Py_ssize_t _next_chunk(_Walk* w, Py_ssize_t i, Py_ssize_t* chunk_end) noexcept:
    """At ``i`` in a chunked value: after the length of the chunk that follows (``chunk_end`` its end),
    or ``i`` itself if none does (an empty state), or -1 if the chunk runs past the data."""
    cdef Py_ssize_t j = i + ((-(i + w.sh)) & 3)
    cdef uint32_t length
    if j + 4 <= w.end:
        length = _u32(w.d + j, w.le)
        if 0 < length < _TAG_MIN:
            if j + 4 + <Py_ssize_t>length > w.end:
                return -1
            while i < j:
                w.d[i] = 0
                i += 1
            chunk_end[0] = j + 4 + length
            return j + 4
    chunk_end[0] = i
    return i


cdef Py_ssize_t _end_of_value(_Walk* w, Py_ssize_t i, Py_ssize_t chunk_end, bint truncated) noexcept:
    """After the state of an outermost chunked value: the index after its end tag, or -1."""
    cdef uint32_t value
    cdef Py_ssize_t j
    if i < chunk_end:
        if not truncated:
            return -1
        i = chunk_end
    while True:
        j = _ulong(w, i, &value)
        if j < 0:
            return -1
        if value >= _END_TAG_MIN:
            break
        if not truncated or not 0 < value < _TAG_MIN or j + <Py_ssize_t>value > w.end:
            return -1
        i = j + value  # the rest of a truncated value: octets of a type unknown here
    return j if value == _INDIRECTION else -1  # the end tag -1


cdef struct _Op:
    Py_ssize_t a, b, c  # zero d[i + a : i + b : c]


cdef struct _Phase:
    Py_ssize_t size, first, n  # the part's octets from this phase, and its ops (first, count)


cdef struct _Part:
    bint counted, nul
    Py_ssize_t unit, limit
    _Phase phases[8]


cdef class _Plan:
    """A flat plan (``layout._flat_plan``) as C arrays, so a value's state is walked without
    reading a Python object: the same steps as ``_cwalk._walk`` over the tuple plan."""

    cdef _Part* parts
    cdef _Op* ops
    cdef Py_ssize_t n
    cdef object source  # the tuple plan (kept alive: the cache is keyed by its id)

    def __dealloc__(self):
        PyMem_Free(self.parts)
        PyMem_Free(self.ops)

    cdef Py_ssize_t walk(self, uint8_t* d, Py_ssize_t i, Py_ssize_t end, Py_ssize_t sh, bint le) noexcept:
        """Where the state that starts at ``i`` ends, or -1 (``_cwalk._walk``'s result)."""
        cdef Py_ssize_t p, j, k, stop, count
        cdef _Part* part
        cdef _Phase* phase
        cdef _Op* op
        cdef _Op* last
        for p in range(self.n):
            part = &self.parts[p]
            phase = &part.phases[(i + sh) & 7]
            j = i + phase.size
            if j > end:
                return -1
            op = &self.ops[phase.first]
            last = op + phase.n
            while op < last:
                k = i + op.a
                stop = i + op.b
                while k < stop:
                    d[k] = 0
                    k += op.c
                op += 1
            if not part.counted:
                i = j
                continue
            count = _u32(d + j - 4, le)
            if count > (end - j) // part.unit:
                return -1
            i = j + count * part.unit
            if count > part.limit or (part.nul and (count == 0 or d[i - 1] != 0)):
                return -1
        return i


cdef dict _c_plans = {}


cdef object _compiled(object plan):
    """``plan`` (a tuple flat plan) as a :class:`_Plan`, or None if it holds a step the C
    walk leaves to ``_cwalk._walk`` (cached; the entry keeps the plan alive)."""
    hit = _c_plans.get(id(plan))
    if hit is None:
        if len(_c_plans) > 4096:
            _c_plans.clear()
        hit = _c_plans[id(plan)] = (plan, _compile_plan(<tuple>plan))
    return hit[1]


cdef object _compile_plan(tuple plan):
    cdef _Plan c = _Plan.__new__(_Plan)
    cdef Py_ssize_t n_ops = 0, p, k, m = 0
    cdef tuple part, layout
    for part in plan:
        for layout in part[1]:
            n_ops += len(<tuple>layout[1])
    c.source = plan
    c.n = len(plan)
    c.parts = <_Part*>PyMem_Malloc(max(c.n, 1) * sizeof(_Part))
    c.ops = <_Op*>PyMem_Malloc(max(n_ops, 1) * sizeof(_Op))
    if c.parts == NULL or c.ops == NULL:
        raise MemoryError()
    for p in range(c.n):
        part = plan[p]
        if len(<tuple>part[1]) != 8:
            return None
        c.parts[p].counted = part[0]
        if part[0]:
            c.parts[p].unit, c.parts[p].nul, c.parts[p].limit = part[2], part[3], part[4]
            if c.parts[p].unit <= 0:
                return None
        for k in range(8):
            layout = part[1][k]
            c.parts[p].phases[k].size = layout[0]
            c.parts[p].phases[k].first = m
            c.parts[p].phases[k].n = len(<tuple>layout[1])
            if part[0] and c.parts[p].phases[k].size < 4:
                return None
            for op in layout[1]:
                c.ops[m].a, c.ops[m].b, c.ops[m].c = op[0], op[1], op[2]
                if c.ops[m].a < 0 or c.ops[m].b > c.parts[p].phases[k].size or c.ops[m].c <= 0:
                    return None
                m += 1
    return c


cdef dict _step_plans = {}


cdef object _steps(object node):
    """A flat state's primitives and counted octets in order, for a walk that may cross a chunk
    boundary between any two of them (``valuetypes._split``): tuples (0, size, align) and
    (1, unit, NUL-terminated?, count limit); None for any other node (cached; the entry keeps the node alive)."""
    hit = _step_plans.get(id(node))
    if hit is None:
        if len(_step_plans) > 4096:
            _step_plans.clear()
        steps = []
        hit = _step_plans[id(node)] = (node, tuple(steps) if _add_steps(node, steps) else None)
    return hit[1]


cdef bint _add_steps(object node, list steps) except -1:
    if len(steps) > _MAX_STEPS:
        return False
    if isinstance(node, _Prim):
        if node.size:
            steps.append((0, node.size, node.align))
        return True
    if isinstance(node, _Group):
        return all([_add_steps(child, steps) for child in node.children])
    if isinstance(node, _Array):
        if not node.lay[0][0] or node.n > _MAX_STEPS:  # elements that take no octets count against a bound
            return False
        for _ in range(node.n):
            if not _add_steps(node.elem, steps):
                return False
        return True
    if isinstance(node, _Counted):
        for child in node.prefix:
            if not _add_steps(child, steps):
                return False
        steps.append((1, node.unit, node.nul, node.limit))
        return True
    if isinstance(node, _Struct):
        return all([_add_steps(part, steps) for part in node.parts])
    return False


cdef Py_ssize_t _room(_Walk* w, Py_ssize_t i, Py_ssize_t size, Py_ssize_t align, Py_ssize_t* chunk_end) noexcept:
    """Where a primitive of ``size`` at or after ``i`` starts, crossing into the next chunk if this
    one ends first (the padding before it zeroed), or -1."""
    cdef Py_ssize_t j, k
    while True:
        j = i + ((-(i + w.sh)) & (align - 1))
        if j + size <= chunk_end[0]:
            break
        if chunk_end[0] > j or chunk_end[0] < i:
            return -1
        while i < chunk_end[0]:
            w.d[i] = 0
            i += 1
        k = _next_chunk(w, chunk_end[0], chunk_end)
        if k < 0 or k == chunk_end[0]:  # no chunk follows: the state is cut short
            return -1
        i = k
    while i < j:
        w.d[i] = 0
        i += 1
    return j


cdef Py_ssize_t _split(_Walk* w, tuple steps, Py_ssize_t i, Py_ssize_t* chunk_end) except -2:
    """After a chunked value's state whose chunks may end between any two of its ``steps``, or -1."""
    cdef tuple step
    cdef Py_ssize_t j, k, n, c
    cdef uint32_t count
    cdef uint8_t last
    for step in steps:
        if step[0] == 0:
            j = _room(w, i, step[1], step[2], chunk_end)
            if j < 0:
                return -1
            i = j + <Py_ssize_t>step[1]
            continue
        j = _room(w, i, 4, 4, chunk_end)
        if j < 0:
            return -1
        count = _u32(w.d + j, w.le)
        n = <Py_ssize_t>count * <Py_ssize_t>step[1]
        i = j + 4
        if n > w.end - i:
            return -1
        last = 0
        while n:
            if i >= chunk_end[0]:
                k = _next_chunk(w, i, chunk_end)
                if k < 0 or k == i:
                    return -1
                i = k
            c = min(n, chunk_end[0] - i)
            i += c
            n -= c
            last = w.d[i - 1]
        if count > <Py_ssize_t>step[3] or (step[2] and (count == 0 or last)):
            return -1
    return i


cdef class _Run:
    """One run's declared node: its repository id's octets and its state's flat plan (computed on first use)."""

    cdef object node, own_id, plan
    cdef bint planned
    cdef bint deep  # the nesting bound leaves no room for one more value
    cdef dict table
    cdef Py_ssize_t ids[_MAX_IDS]

    cdef object plan_of(self, object found):
        """The compiled flat plan of ``found``'s state, or None (its tuple plan is ``_cwalk._walk``'s, if any)."""
        cdef object plan
        if found is not self.node:
            plan = _layout._flat_plan(found.state())
            return None if plan is None else _compiled(plan)
        if not self.planned:
            plan = _layout._flat_plan(self.node.state())
            self.plan = None if plan is None else _compiled(plan)
            self.planned = True
        return self.plan

    cdef Py_ssize_t one(self, _Walk* w, Py_ssize_t i) except -2:
        """The index after the value at or after ``i``, or -1."""
        cdef uint32_t head, url
        cdef Py_ssize_t j = _ulong(w, i, &head), k, start, target, nids = 1, chunk_end = 0
        cdef bint truncated = False
        cdef object found = self.node
        cdef object plan, steps
        if j < 0:
            return -1
        if head == 0:
            return j
        if head == _INDIRECTION:
            return _indirection(w, j, _VALUE, self.table, &target)
        if not _TAG_MIN <= head <= _TAG_MAX or head & 6 == 4 or self.deep:
            return -1
        start = j - 4
        if not _record(w, start, _VALUE):
            return -1
        if head & 1:  # a codebase URL, or an indirection to one
            k = _ulong(w, j, &url)
            if k < 0:
                return -1
            if url == _INDIRECTION:
                j = _indirection(w, k, _CODEBASE_URL, self.table, &target)
            elif _record(w, k - 4, _CODEBASE_URL):
                j = _string(w, k - 4)
            else:
                return -1
            if j < 0:
                return -1
        if head & 6:
            if head & 6 == 6:
                j = _repo_ids(w, j, self.ids, &nids, True, self.table)
            else:
                j = _repo_id(w, j, self.ids, True, self.table)
            if j < 0:
                return -1
            found = _actual(w, self.node, self.own_id, self.ids, nids if head & 8 else 1, &truncated)
            if found is None:
                return -1
        plan = self.plan_of(found)
        if plan is None:
            return -1
        if not head & 8:
            return (<_Plan>plan).walk(w.d, j, w.end, w.sh, w.le)
        j = _next_chunk(w, j, &chunk_end)
        if j < 0:
            return -1
        k = (<_Plan>plan).walk(w.d, j, chunk_end, w.sh, w.le)
        if k < 0:  # not in one chunk (or wrong): step by step across chunk boundaries
            steps = _steps(found.state())
            if steps is None:
                return -1
            k = _split(w, <tuple>steps, j, &chunk_end)
            if k < 0:
                return -1
        return _end_of_value(w, k, chunk_end, truncated)


def _zero_values(node, f, Py_ssize_t i, Py_ssize_t n):
    """``n`` values of ``node`` at ``f.data[i]`` scrubbed: the index after them, or -1 (the frame's table
    untouched) for a form or an error this leaves to the Python walk.  The frame's table gets the
    run's starts unless the run ends the data."""
    if f.chunked or f.end != f.full_end or i < 0 or n < 0:
        return -1
    cdef _Run run = _Run.__new__(_Run)
    run.node = node
    try:
        run.own_id = (<str>node.repo_id).encode("latin-1")
    except UnicodeEncodeError:  # never equal to a repository id read from the wire
        run.own_id = None
    run.table = <dict>f.values
    run.deep = f.nest >= f.bounds.max_nesting_depth
    cdef Py_buffer view
    cdef _Walk w
    cdef Py_ssize_t r
    PyObject_GetBuffer(f.data, &view, PyBUF_WRITABLE)
    w.d, w.end, w.sh, w.le, w.n = <uint8_t*>view.buf, f.end, f.sh, f.le, 0
    w.cap = (w.end - i) // 4 + 2 if w.end > i else 2  # every start is at its own 4-aligned offset
    w.offs = <Py_ssize_t*>PyMem_Malloc(w.cap * sizeof(Py_ssize_t))
    w.kinds = <uint8_t*>PyMem_Malloc(w.cap)
    try:
        if w.offs == NULL or w.kinds == NULL:
            raise MemoryError()
        if w.end > view.len:
            return -1
        for _ in range(n):
            i = run.one(&w, i)
            if i < 0:
                return -1
        if i < w.end:  # something follows that may point back into the run
            for r in range(w.n):
                run.table[w.offs[r]] = _KINDS[w.kinds[r]]
        return i
    finally:
        PyMem_Free(w.offs)
        PyMem_Free(w.kinds)
        PyBuffer_Release(&view)
