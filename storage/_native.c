/* groupd.storage._native: the start-up replay's two inner loops in C (issue 26).
 *
 * Why C: the replay of __consumer_offsets at start-up must reach 2M records/s with CRC checks
 * (Kafka's coordinator loads ~4.4M/s). Profiled in pure Python (bench/replay.py, py-spy), ~60% of
 * the load was two per-record loops: walking a batch's records (records.py `_decode_into`) and
 * folding plain offset commits into the offsets dicts (coordinator/offsets.py
 * `replay_plain_commits`); already tuned Python they ran at ~0.4M records/s together.
 *
 * Both functions here cover the common case only and say so by their result: whatever they do not
 * cover (headers, a varint beyond 64 bits, any inconsistency in a record, a key never seen, a value
 * that is not a v3 commit without metadata) is handed back untouched to the pure-Python code, which
 * stays the reference and words the errors. So this file never raises on bad input: it declines.
 * tests/storage/test_native.py checks both paths agree (hypothesis) and fuzzes this code with
 * random and truncated bytes. GROUPD_NO_NATIVE=1 (read once at import) turns it off.
 *
 * `frame_records` is Produce's (not the replay's): the framing walk of every produced batch
 * (records.py `check_record_frames`), under the same rule: True only where Python accepts.
 *
 * CRC-32C stays with the crc32c package (a batch at a time, hardware accelerated).
 *
 * `fold_commits` knows the offset-commit record layout (coordinator/serde.py), which storage
 * otherwise never does: it lives here so that groupd has one extension module for the replay, and
 * storage imports nothing of the coordinator for it (the caller passes the key and value types and
 * the key cache in; coordinator/offsets.py holds the Python reference).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* An unsigned varint of at most 64 bits at p[*pos] before end; 0 when it is longer, runs past
 * `end` or carries bits beyond 64 (the Python reader then decides what it is). */
static inline int
read_uvarint(const unsigned char *p, Py_ssize_t end, Py_ssize_t *pos, uint64_t *out)
{
    uint64_t result = 0;
    int shift = 0;
    Py_ssize_t i = *pos;
    for (;;) {
        if (i >= end)
            return 0;
        unsigned char b = p[i++];
        if (shift == 63 && (b & 0x7E))
            return 0; /* bits beyond 64 */
        result |= ((uint64_t)(b & 0x7F)) << shift;
        if (b < 0x80) {
            *pos = i;
            *out = result;
            return 1;
        }
        shift += 7;
        if (shift > 63)
            return 0;
    }
}

static inline int64_t
zigzag(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* decode_records(out, data, pos, end, count, base_offset, base_timestamp, fixed_timestamp) -> bool
 *
 * Appends one (offset, timestamp, key, value) tuple per record of the batch body
 * data[pos:end] (the `count` records after a v2 batch header) and returns True, exactly as
 * records.py `_decode_into(..., full=False)` does; or leaves `out` as it was and returns False
 * when the body is anything but plain records without headers, all fields consistent. */
static PyObject *
decode_records(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "decode_records takes 8 arguments");
        return NULL;
    }
    PyObject *out = args[0], *data = args[1];
    if (!PyList_CheckExact(out) || !PyBytes_CheckExact(data))
        Py_RETURN_FALSE; /* a view or a bytes subclass: the Python reader's */
    Py_ssize_t pos = PyLong_AsSsize_t(args[2]);
    Py_ssize_t end = PyLong_AsSsize_t(args[3]);
    Py_ssize_t count = PyLong_AsSsize_t(args[4]);
    if ((pos == -1 || end == -1 || count == -1) && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_FALSE;
    }
    int overflow = 0;
    long long base_offset = PyLong_AsLongLongAndOverflow(args[5], &overflow);
    if (overflow || (base_offset == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        Py_RETURN_FALSE;
    }
    long long base_ts = PyLong_AsLongLongAndOverflow(args[6], &overflow);
    if (overflow || (base_ts == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        Py_RETURN_FALSE;
    }
    int fixed = args[7] != Py_None;
    long long fixed_ts = 0;
    if (fixed) {
        fixed_ts = PyLong_AsLongLongAndOverflow(args[7], &overflow);
        if (overflow || (fixed_ts == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            Py_RETURN_FALSE;
        }
    }
    Py_ssize_t size = PyBytes_GET_SIZE(data);
    /* The Python reader indexes the whole buffer; declining anything outside it keeps this simple. */
    if (pos < 0 || end < pos || end > size || count < 0 || count > end - pos)
        Py_RETURN_FALSE;
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(data);
    Py_ssize_t mark = PyList_GET_SIZE(out);
    PyObject *fixed_obj = NULL;
    if (fixed) {
        fixed_obj = args[7];
        Py_INCREF(fixed_obj);
    }
    for (Py_ssize_t r = 0; r < count; r++) {
        uint64_t v;
        if (!read_uvarint(p, end, &pos, &v))
            goto decline;
        int64_t len = zigzag(v);
        if (len <= 0 || len > end - pos)
            goto decline;
        Py_ssize_t rec_end = pos + (Py_ssize_t)len;
        pos += 1; /* attributes */
        if (!read_uvarint(p, rec_end, &pos, &v))
            goto decline;
        int64_t ts_delta = zigzag(v);
        if (!read_uvarint(p, rec_end, &pos, &v))
            goto decline;
        int64_t off_delta = zigzag(v);
        long long ts, offset;
        if (__builtin_add_overflow(base_offset, off_delta, &offset))
            goto decline;
        if (!fixed && __builtin_add_overflow(base_ts, ts_delta, &ts))
            goto decline;
        if (!read_uvarint(p, rec_end, &pos, &v))
            goto decline;
        int64_t klen = zigzag(v);
        Py_ssize_t kpos = pos;
        if (klen >= 0) {
            if (klen > rec_end - pos)
                goto decline;
            pos += (Py_ssize_t)klen;
        } else if (klen != -1)
            goto decline;
        if (!read_uvarint(p, rec_end, &pos, &v))
            goto decline;
        int64_t vlen = zigzag(v);
        Py_ssize_t vpos = pos;
        if (vlen >= 0) {
            if (vlen > rec_end - pos)
                goto decline;
            pos += (Py_ssize_t)vlen;
        } else if (vlen != -1)
            goto decline;
        /* headers: only none (one zero byte) is ours, ending the record exactly */
        if (pos >= rec_end || p[pos] != 0 || pos + 1 != rec_end)
            goto decline;
        pos += 1;
        PyObject *item = PyTuple_New(4);
        if (item == NULL)
            goto error;
        PyObject *o = PyLong_FromLongLong(offset);
        PyObject *t = fixed ? (Py_INCREF(fixed_obj), fixed_obj) : PyLong_FromLongLong(ts);
        PyObject *k, *val;
        if (klen >= 0)
            k = PyBytes_FromStringAndSize((const char *)p + kpos, (Py_ssize_t)klen);
        else {
            k = Py_None;
            Py_INCREF(k);
        }
        if (vlen >= 0)
            val = PyBytes_FromStringAndSize((const char *)p + vpos, (Py_ssize_t)vlen);
        else {
            val = Py_None;
            Py_INCREF(val);
        }
        /* PyTuple_SET_ITEM of NULL is safe: the tuple's dealloc skips NULL items */
        PyTuple_SET_ITEM(item, 0, o);
        PyTuple_SET_ITEM(item, 1, t);
        PyTuple_SET_ITEM(item, 2, k);
        PyTuple_SET_ITEM(item, 3, val);
        if (o == NULL || t == NULL || k == NULL || val == NULL) {
            Py_DECREF(item);
            goto error;
        }
        /* Ints, bytes and None cannot make a cycle: untracked, a million of them do not make the
         * collector run over and over during the load (CPython untracks such tuples too, but only
         * when a collection has seen them once). */
        PyObject_GC_UnTrack(item);
        int rc = PyList_Append(out, item);
        Py_DECREF(item);
        if (rc < 0)
            goto error;
    }
    if (pos != end)
        goto decline;
    Py_XDECREF(fixed_obj);
    Py_RETURN_TRUE;
decline:
    Py_XDECREF(fixed_obj);
    if (PyList_SetSlice(out, mark, PyList_GET_SIZE(out), NULL) < 0)
        return NULL;
    Py_RETURN_FALSE;
error:
    Py_XDECREF(fixed_obj);
    {
        /* keep the exception (MemoryError) while the partial output goes */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyList_SetSlice(out, mark, PyList_GET_SIZE(out), NULL);
        PyErr_Restore(type, value, tb);
    }
    return NULL;
}

static inline int64_t
be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return (int64_t)v;
}

static inline int32_t
be32(const unsigned char *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}

/* An offset commit's key (versions 0 and 1: int16 version, group, topic as int16-length strings,
 * int32 partition; bytes after it ignored, as coordinator/serde.py `_decode_offset_key` does) as a
 * new `key_type` tuple; NULL without an exception when the bytes are anything else (the Python
 * decoder judges them), NULL with one on a failed allocation. */
static PyObject *
decode_offset_key(PyObject *kb, PyTypeObject *key_type)
{
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(kb);
    Py_ssize_t n = PyBytes_GET_SIZE(kb);
    if (n < 4 || p[0] != 0 || p[1] > 1)
        return NULL;
    Py_ssize_t gl = (int16_t)((p[2] << 8) | p[3]);
    if (gl < 0 || 4 + gl + 2 > n)
        return NULL;
    Py_ssize_t tpos = 4 + gl;
    Py_ssize_t tl = (int16_t)((p[tpos] << 8) | p[tpos + 1]);
    if (tl < 0 || tpos + 2 + tl + 4 > n)
        return NULL;
    Py_ssize_t ppos = tpos + 2 + tl;
    PyObject *group = PyUnicode_DecodeUTF8((const char *)p + 4, gl, NULL);
    if (group == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
            PyErr_Clear();
        return NULL;
    }
    PyObject *topic = PyUnicode_DecodeUTF8((const char *)p + tpos + 2, tl, NULL);
    if (topic == NULL) {
        Py_DECREF(group);
        if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
            PyErr_Clear();
        return NULL;
    }
    PyObject *partition = PyLong_FromLong(be32(p + ppos));
    PyObject *key = partition == NULL ? NULL : key_type->tp_alloc(key_type, 3);
    if (key == NULL) {
        Py_DECREF(group);
        Py_DECREF(topic);
        Py_XDECREF(partition);
        return NULL;
    }
    PyTuple_SET_ITEM(key, 0, group);
    PyTuple_SET_ITEM(key, 1, topic);
    PyTuple_SET_ITEM(key, 2, partition);
    PyObject_GC_UnTrack(key); /* strings and an int: no cycle (see decode_records) */
    return key;
}

/* fold_commits(offsets, records, start, keys, decode_key, key_type, value_type) -> int
 *
 * The C twin of coordinator/offsets.py `replay_plain_commits` (see there for what it covers):
 * from records[start] on, each (offset, timestamp, key bytes, value bytes) whose key is an
 * offset commit's (looked up in `keys`, the serde's cache of decoded keys, or decoded by
 * `decode_key`, which fills it) and whose value is a v3 commit without metadata (24 bytes) becomes
 * offsets[group][(topic, partition)] = value_type(offset, leader_epoch, "", commit_timestamp, -1).
 * Returns the index of the first record it does not cover (len(records) when none). */
static PyObject *
fold_commits(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "fold_commits takes 7 arguments");
        return NULL;
    }
    PyObject *offsets = args[0], *records = args[1], *keys = args[3];
    PyObject *key_type = args[5], *value_type = args[6];
    if (!PyDict_CheckExact(offsets) || !PyList_CheckExact(records) || !PyDict_CheckExact(keys) ||
        !PyType_Check(key_type) || !PyType_Check(value_type) ||
        !PyType_IsSubtype((PyTypeObject *)value_type, &PyTuple_Type) ||
        !PyType_IsSubtype((PyTypeObject *)key_type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "fold_commits(dict, list, int, dict, int, tuple type, tuple type)");
        return NULL;
    }
    PyTypeObject *vtype = (PyTypeObject *)value_type;
    /* a tuple subclass with a __dict__ (no __slots__ = ()) is not what tuple.__new__ alone makes */
    if (vtype->tp_dictoffset != 0) {
        PyErr_SetString(PyExc_TypeError, "value_type must be a tuple subclass without a __dict__");
        return NULL;
    }
    Py_ssize_t i = PyLong_AsSsize_t(args[2]);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t cache_max = PyLong_AsSsize_t(args[4]);
    if (cache_max == -1 && PyErr_Occurred())
        return NULL;
    if (i < 0)
        i = 0;
    PyObject *empty = PyUnicode_New(0, 0);
    PyObject *minus_one = PyLong_FromLong(-1);
    if (empty == NULL || minus_one == NULL) {
        Py_XDECREF(empty);
        Py_XDECREF(minus_one);
        return NULL;
    }
    PyObject *gid = NULL;           /* borrowed from the key, which the cache holds */
    PyObject *group_offsets = NULL; /* borrowed from offsets */
    PyObject *held_key = NULL;      /* the current key, owned (the cache may be cleared meanwhile) */
    for (; i < PyList_GET_SIZE(records); i++) {
        PyObject *rec = PyList_GET_ITEM(records, i);
        if (!PyTuple_CheckExact(rec) || PyTuple_GET_SIZE(rec) != 4)
            break;
        PyObject *kb = PyTuple_GET_ITEM(rec, 2), *vb = PyTuple_GET_ITEM(rec, 3);
        if (!PyBytes_CheckExact(vb) || PyBytes_GET_SIZE(vb) != 24 || !PyBytes_CheckExact(kb))
            break;
        const unsigned char *v = (const unsigned char *)PyBytes_AS_STRING(vb);
        /* version 3, metadata length 0 (bytes 14-15) */
        if (v[0] != 0 || v[1] != 3 || v[14] != 0 || v[15] != 0)
            break;
        PyObject *key = PyDict_GetItemWithError(keys, kb); /* borrowed */
        if (key == NULL) {
            if (PyErr_Occurred())
                goto error;
            key = decode_offset_key(kb, (PyTypeObject *)key_type);
            if (key == NULL) {
                if (PyErr_Occurred())
                    goto error;
                break; /* another record type, or malformed: the generic path's */
            }
            if (PyDict_GET_SIZE(keys) >= cache_max)
                PyDict_Clear(keys);
            if (PyDict_SetItem(keys, kb, key) < 0) {
                Py_DECREF(key);
                goto error;
            }
        } else
            Py_INCREF(key);
        if (Py_TYPE(key) != (PyTypeObject *)key_type || PyTuple_GET_SIZE(key) != 3) {
            Py_DECREF(key);
            break;
        }
        PyObject *group = PyTuple_GET_ITEM(key, 0);
        if (gid == NULL || (group != gid && PyObject_RichCompareBool(group, gid, Py_EQ) != 1)) {
            if (PyErr_Occurred()) {
                Py_DECREF(key);
                goto error;
            }
            group_offsets = PyDict_GetItemWithError(offsets, group);
            if (group_offsets == NULL) {
                if (PyErr_Occurred()) {
                    Py_DECREF(key);
                    goto error;
                }
                PyObject *d = PyDict_New();
                if (d == NULL || PyDict_SetItem(offsets, group, d) < 0) {
                    Py_XDECREF(d);
                    Py_DECREF(key);
                    goto error;
                }
                group_offsets = d;
                Py_DECREF(d); /* offsets holds it */
            }
            if (!PyDict_CheckExact(group_offsets)) {
                Py_DECREF(key);
                PyErr_SetString(PyExc_TypeError, "offsets values must be dicts");
                goto error;
            }
            gid = group;
            Py_XDECREF(held_key);
            held_key = key; /* keeps gid alive */
            Py_INCREF(held_key);
        }
        PyObject *tp = PyTuple_Pack(2, PyTuple_GET_ITEM(key, 1), PyTuple_GET_ITEM(key, 2));
        Py_DECREF(key);
        if (tp == NULL)
            goto error;
        PyObject *value = vtype->tp_alloc(vtype, 5);
        if (value == NULL) {
            Py_DECREF(tp);
            goto error;
        }
        PyObject *off = PyLong_FromLongLong(be64(v + 2));
        PyObject *epoch = PyLong_FromLong(be32(v + 10));
        PyObject *ts = PyLong_FromLongLong(be64(v + 16));
        Py_INCREF(empty);
        Py_INCREF(minus_one);
        PyTuple_SET_ITEM(value, 0, off);
        PyTuple_SET_ITEM(value, 1, epoch);
        PyTuple_SET_ITEM(value, 2, empty);
        PyTuple_SET_ITEM(value, 3, ts);
        PyTuple_SET_ITEM(value, 4, minus_one);
        if (off == NULL || epoch == NULL || ts == NULL) {
            Py_DECREF(value);
            Py_DECREF(tp);
            goto error;
        }
        /* strings and ints: no cycle (see decode_records) */
        PyObject_GC_UnTrack(tp);
        PyObject_GC_UnTrack(value);
        int rc = PyDict_SetItem(group_offsets, tp, value);
        Py_DECREF(tp);
        Py_DECREF(value);
        if (rc < 0)
            goto error;
    }
    Py_XDECREF(held_key);
    Py_DECREF(empty);
    Py_DECREF(minus_one);
    return PyLong_FromSsize_t(i);
error:
    Py_XDECREF(held_key);
    Py_DECREF(empty);
    Py_DECREF(minus_one);
    return NULL;
}

/* frame_records(data, pos, end, count) -> bool
 *
 * True when `count` uncompressed records exactly tile data[pos:end], each record's length a
 * positive zig-zag varint of at most 5 bytes (Kafka's int32 varint): records.py
 * `check_record_frames` then has nothing to say and returns at once. False for anything else (a
 * longer varint, a length that is not positive, records that overrun or fall short of `end`,
 * arguments out of range): the Python walk then decides, and words the error. So True only ever
 * stands where the Python walk accepts. Produce's hot path (issue 26): the Python walk was a
 * sixth of the daemon's CPU on a 100 B produce load, one table lookup per record. */
static PyObject *
frame_records(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "frame_records(data, pos, end, count)");
        return NULL;
    }
    if (!PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "frame_records: data must be bytes");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    Py_ssize_t end = PyLong_AsSsize_t(args[2]);
    Py_ssize_t count = PyLong_AsSsize_t(args[3]);
    if ((pos == -1 || end == -1 || count == -1) && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_FALSE;
    }
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    Py_ssize_t n = PyBytes_GET_SIZE(args[0]);
    if (pos < 0 || end > n || pos > end || count < 0 || count > end - pos)
        Py_RETURN_FALSE;
    for (Py_ssize_t i = 0; i < count; i++) {
        uint32_t v = 0;
        int k = 0;
        for (;;) {
            if (pos >= end || k == 5)
                Py_RETURN_FALSE;
            unsigned char b = p[pos++];
            v |= (uint32_t)(b & 0x7F) << (7 * k);
            k++;
            if (b < 0x80)
                break;
        }
        if (k == 5 && (p[pos - 1] & 0x70))
            Py_RETURN_FALSE; /* beyond 32 bits */
        if ((v & 1) || v == 0)
            Py_RETURN_FALSE; /* negative or zero length */
        uint32_t len = v >> 1;
        if ((Py_ssize_t)len > end - pos)
            Py_RETURN_FALSE;
        pos += (Py_ssize_t)len;
    }
    if (pos == end)
        Py_RETURN_TRUE;
    Py_RETURN_FALSE;
}

static PyMethodDef methods[] = {
    {"decode_records", (PyCFunction)(void (*)(void))decode_records, METH_FASTCALL,
     "decode_records(out, data, pos, end, count, base_offset, base_timestamp, fixed_timestamp) -> bool"},
    {"fold_commits", (PyCFunction)(void (*)(void))fold_commits, METH_FASTCALL,
     "fold_commits(offsets, records, start, keys, cache_max, key_type, value_type) -> int"},
    {"frame_records", (PyCFunction)(void (*)(void))frame_records, METH_FASTCALL,
     "frame_records(data, pos, end, count) -> bool"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "groupd.storage._native", "The replay's inner loops in C (see storage/_native.c).",
    -1, methods,
};

PyMODINIT_FUNC
PyInit__native(void)
{
    return PyModule_Create(&module);
}
