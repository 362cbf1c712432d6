# What other compiled modules take from the framing twins: reading and writing
# a slotted object's slots at their offsets (see _slot_offsets).
from cpython.object cimport PyObject


cdef extern from *:
    """
    #include <structmember.h>
    /* The byte offset of the slot a member descriptor reads and writes, or -1
       if it is not a plain object slot (T_OBJECT_EX, writable). */
    static inline Py_ssize_t pyorb_slot_offset(PyObject *descr) {
        PyMemberDef *m;
        if (Py_TYPE(descr) != &PyMemberDescr_Type)
            return -1;
        m = ((PyMemberDescrObject *)descr)->d_member;
        if (m->type != T_OBJECT_EX || (m->flags & READONLY))
            return -1;
        return m->offset;
    }
    /* The slot at `offset` of `obj` (borrowed; NULL if unset). */
    #define pyorb_slot(obj, offset) (*(PyObject **)((char *)(obj) + (offset)))
    /* What the member descriptor's __set__ does for a plain object slot. */
    static inline void pyorb_slot_set(PyObject *obj, Py_ssize_t offset, PyObject *value) {
        PyObject **addr = (PyObject **)((char *)obj + offset);
        PyObject *old = *addr;
        Py_INCREF(value);
        *addr = value;
        Py_XDECREF(old);
    }
    """
    Py_ssize_t _slot_offset "pyorb_slot_offset"(object descr)
    PyObject* _slot "pyorb_slot"(object obj, Py_ssize_t offset)
    void _slot_set "pyorb_slot_set"(object obj, Py_ssize_t offset, object value)


cdef inline object _get(obj, bint fast, Py_ssize_t offset, str name):
    """``obj.<name>``: at ``offset`` if ``fast`` (the caller checked ``obj``'s class) and the
    slot is set, else through getattr (an unset slot: the AttributeError getattr gives)."""
    cdef PyObject* value
    if fast:
        value = _slot(obj, offset)
        if value != NULL:
            return <object>value
    return getattr(obj, name)


cdef inline int _put(obj, bint fast, Py_ssize_t offset, str name, value) except -1:
    """``obj.<name> = value``: at ``offset`` if ``fast``, else through setattr."""
    if fast:
        _slot_set(obj, offset, value)
    else:
        setattr(obj, name, value)
    return 0


cdef tuple _slot_offsets(cls, tuple names)
cdef object _new_context(object context_id, object data)
