/* groupd.broker.data_plane._produce: the per-request and per-partition steps of Produce, in C.
 *
 * A small Produce (franz-go's shape on three brokers: ~2 partitions of ~15 records) cost ~330k
 * daemon instructions, ~280 Python-level calls, most of them the interpreter's own work around a
 * few fields (#26, #29 item 4). Here, each in one C call:
 *
 *   parse_body(version, generic, frame, pos)  the request body (v3-12) as the generic decoder
 *       makes it: the same dict of the same keys, records as bytes (from 4 KiB a memoryview of
 *       the frame: equal to those bytes, and the log writes the batch from the frame itself).
 *       Anything it does not take (tagged fields, null arrays, long varints, truncation, bad
 *       UTF-8) goes to `generic`, which decides as it always did (ProduceRequest's schema).
 *
 * Maintenance: the request layout is Produce v3-12's, fixed by Kafka's schema; a new version is
 * left to the generic decoder until parse_body is taught it (its range check). BatchView's
 * slots are found by name at import (bind: a renamed one is an error there); a slot added to
 * BatchView must be added to slot_names too, which the equivalence test's comparison of every
 * slot in BatchView.__slots__ says. The CRC is the crc32c package's own function.
 *   check_batch(raw, max_bytes, version)  Kafka's header checks of one partition's batch, the
 *       ones batch_checks.check_batch makes: ProduceRequest.validateRecords (one v2 batch filling
 *       the data exactly, a known codec, zstd from v7), UnifiedLog.analyzeAndValidateRecords
 *       (max.message.bytes, the CRC: batch.ensureValid) and LogValidator.validateBatch (base
 *       offset 0, no control flag, record count == lastOffsetDelta + 1 > 0, a producer id for a
 *       transactional batch, a sequence for an idempotent one). A `BatchView` of the batch when
 *       every check passes, else None: the Python checks then find and word the failure in
 *       Kafka's order. Like LogValidator.assignOffsetsNonCompressed, no record is decoded.
 *   any_transactional(topic_data)  whether a partition's data is a transactional batch (as
 *       KafkaApis.handleProduceRequest asks before it looks at topics, from each batch's header:
 *       rec.is_transactional_batch); None for what it cannot read.
 *   encode_answer(version, answers)  produce_wire.encode_answer: a v3+ answer whose partitions all
 *       succeeded; None for anything but (str, [(int, int, int, int)]) lists.
 *
 * The Python code stays the reference and the fallback (GROUPD_NO_NATIVE=1, or no compiler):
 * tests/broker/test_produce_native.py compares the two value for value and byte for byte and
 * feeds the C code random and truncated bytes. Every read is bounds-checked.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

/* ---- bound at import (bind): BatchView's slots and the crc32c function --------------------- */

enum {
    S_BASE_OFFSET,
    S_PARTITION_LEADER_EPOCH,
    S_MAGIC,
    S_CRC,
    S_ATTRIBUTES,
    S_LAST_OFFSET_DELTA,
    S_BASE_TIMESTAMP,
    S_MAX_TIMESTAMP,
    S_PRODUCER_ID,
    S_PRODUCER_EPOCH,
    S_BASE_SEQUENCE,
    S_RECORD_COUNT,
    S_SIZE,
    S_BUFFER,
    S_POSITION,
    N_SLOTS
};

static const char *slot_names[N_SLOTS] = {
    "base_offset",  "partition_leader_epoch", "magic",         "crc",         "attributes",
    "last_offset_delta", "base_timestamp",    "max_timestamp", "producer_id", "producer_epoch",
    "base_sequence", "record_count",          "size",          "buffer",      "position",
};

static PyTypeObject *view_type = NULL;
static Py_ssize_t slot_offset[N_SLOTS];
static PyObject *crc_func = NULL;
static PyObject *small_zero = NULL;

static PyObject *bind(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyType_Check(args[0]) || !PyCallable_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "bind(BatchView, crc32c)");
        return NULL;
    }
    PyTypeObject *tp = (PyTypeObject *)args[0];
    Py_ssize_t offsets[N_SLOTS];
    for (int i = 0; i < N_SLOTS; i++) {
        PyObject *d = PyObject_GetAttrString((PyObject *)tp, slot_names[i]);
        if (d == NULL)
            return NULL;
        /* a __slots__ member of an object type: its value is a PyObject * at a fixed offset */
        if (Py_TYPE(d) != &PyMemberDescr_Type || ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX) {
            Py_DECREF(d);
            PyErr_Format(PyExc_TypeError, "%s is not an object slot", slot_names[i]);
            return NULL;
        }
        offsets[i] = ((PyMemberDescrObject *)d)->d_member->offset;
        Py_DECREF(d);
    }
    memcpy(slot_offset, offsets, sizeof offsets);
    Py_INCREF(tp);
    Py_XSETREF(view_type, tp);
    Py_INCREF(args[1]);
    Py_XSETREF(crc_func, args[1]);
    Py_RETURN_NONE;
}

/* ---- reading ------------------------------------------------------------------------------- */

static inline int64_t rd64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return (int64_t)v;
}

static inline int32_t rd32(const unsigned char *p) {
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3]);
}

static inline int16_t rd16(const unsigned char *p) { return (int16_t)((uint16_t)p[0] << 8 | (uint16_t)p[1]); }

/* ---- check_batch ---------------------------------------------------------------------------- */

/* The bytes of `obj` when it is bytes, or a live 1-D contiguous memoryview of bytes (parse_body's
 * large records): their start and length, the bytes object that owns them and where in it they
 * start. 0 for anything else. */
static int bytes_of(PyObject *obj, const unsigned char **buf, Py_ssize_t *len, PyObject **owner, Py_ssize_t *at) {
    if (PyBytes_CheckExact(obj)) {
        *buf = (const unsigned char *)PyBytes_AS_STRING(obj);
        *len = PyBytes_GET_SIZE(obj);
        *owner = obj;
        *at = 0;
        return 1;
    }
    if (!PyMemoryView_Check(obj))
        return 0;
    PyMemoryViewObject *mv = (PyMemoryViewObject *)obj;
    if (mv->flags & _Py_MEMORYVIEW_RELEASED || mv->mbuf->flags & _Py_MANAGED_BUFFER_RELEASED)
        return 0;
    Py_buffer *view = &mv->view;
    PyObject *base = view->obj;
    if (base == NULL || !PyBytes_CheckExact(base) || view->ndim != 1 || view->itemsize != 1 ||
        !(mv->flags & _Py_MEMORYVIEW_C) || (view->strides != NULL && view->strides[0] != 1))
        return 0;
    const char *start = PyBytes_AS_STRING(base);
    Py_ssize_t off = (const char *)view->buf - start;
    if (off < 0 || view->len < 0 || off + view->len > PyBytes_GET_SIZE(base))
        return 0;
    *buf = (const unsigned char *)view->buf;
    *len = view->len;
    *owner = base;
    *at = off;
    return 1;
}

#define HEADER_SIZE 61
#define LOG_OVERHEAD 12
#define BATCH_OVERHEAD (HEADER_SIZE - LOG_OVERHEAD)
#define COMPRESSION_MASK 0x07
#define COMPRESSION_ZSTD 4
#define TRANSACTIONAL_FLAG 0x10
#define CONTROL_FLAG 0x20

static int set_slot(PyObject *obj, int i, PyObject *v) {
    if (v == NULL)
        return -1;
    *(PyObject **)((char *)obj + slot_offset[i]) = v; /* a new object: the slot was NULL */
    return 0;
}

static PyObject *check_batch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "check_batch(raw, max_bytes, version)");
        return NULL;
    }
    const unsigned char *b;
    Py_ssize_t n, at;
    PyObject *owner;
    if (view_type == NULL || crc_func == NULL || !bytes_of(args[0], &b, &n, &owner, &at))
        Py_RETURN_NONE;
    if (!PyLong_Check(args[1]) || !PyLong_Check(args[2]))
        Py_RETURN_NONE;
    int overflow;
    long long max_bytes = PyLong_AsLongLongAndOverflow(args[1], &overflow);
    if (overflow > 0)
        max_bytes = LLONG_MAX; /* a limit beyond any batch */
    else if (overflow < 0)
        Py_RETURN_NONE;
    long version = PyLong_AsLongAndOverflow(args[2], &overflow);
    if (overflow)
        Py_RETURN_NONE;
    if ((max_bytes == -1 || version == -1) && PyErr_Occurred())
        return NULL;
    if (n < HEADER_SIZE || b[16] != 2)
        Py_RETURN_NONE;
    int64_t base_offset = rd64(b);
    int32_t length = rd32(b + 8);
    if (length < BATCH_OVERHEAD || n - LOG_OVERHEAD < (Py_ssize_t)length)
        Py_RETURN_NONE;
    Py_ssize_t size = LOG_OVERHEAD + (Py_ssize_t)length;
    if (size != n)
        Py_RETURN_NONE;
    int16_t attributes = rd16(b + 21);
    int codec = attributes & COMPRESSION_MASK;
    if (codec > COMPRESSION_ZSTD || (codec == COMPRESSION_ZSTD && version < 7))
        Py_RETURN_NONE;
    if ((long long)size > max_bytes)
        Py_RETURN_NONE;
    uint32_t crc = (uint32_t)rd32(b + 17);
    int32_t last_offset_delta = rd32(b + 23);
    int64_t producer_id = rd64(b + 43);
    int32_t base_sequence = rd32(b + 53);
    int32_t record_count = rd32(b + 57);
    if (base_offset != 0 || attributes & CONTROL_FLAG)
        Py_RETURN_NONE;
    if ((int64_t)record_count != (int64_t)last_offset_delta + 1 || record_count <= 0)
        Py_RETURN_NONE;
    if ((attributes & TRANSACTIONAL_FLAG && producer_id < 0) || (producer_id >= 0 && base_sequence < 0))
        Py_RETURN_NONE;
    /* the CRC last (the costliest check; any earlier failure is worded by Python in its order) */
    PyObject *mv = PyMemoryView_FromMemory((char *)b + 21, size - 21, PyBUF_READ);
    if (mv == NULL)
        return NULL;
    PyObject *got = PyObject_CallOneArg(crc_func, mv);
    Py_DECREF(mv);
    if (got == NULL)
        return NULL;
    unsigned long computed = PyLong_AsUnsignedLong(got);
    Py_DECREF(got);
    if (computed == (unsigned long)-1 && PyErr_Occurred())
        return NULL;
    if (computed != crc)
        Py_RETURN_NONE;
    PyObject *view = view_type->tp_alloc(view_type, 0);
    if (view == NULL)
        return NULL;
    /* a memoryview's batch is read where it lies: the bytes that hold it, from its position */
    Py_INCREF(owner);
    Py_INCREF(small_zero);
    if (set_slot(view, S_BUFFER, owner) || set_slot(view, S_BASE_OFFSET, small_zero) ||
        set_slot(view, S_POSITION, PyLong_FromSsize_t(at)) || set_slot(view, S_PARTITION_LEADER_EPOCH, PyLong_FromLong(rd32(b + 12))) ||
        set_slot(view, S_MAGIC, PyLong_FromLong(2)) || set_slot(view, S_CRC, PyLong_FromUnsignedLong(crc)) ||
        set_slot(view, S_ATTRIBUTES, PyLong_FromLong(attributes)) ||
        set_slot(view, S_LAST_OFFSET_DELTA, PyLong_FromLong(last_offset_delta)) ||
        set_slot(view, S_BASE_TIMESTAMP, PyLong_FromLongLong(rd64(b + 27))) ||
        set_slot(view, S_MAX_TIMESTAMP, PyLong_FromLongLong(rd64(b + 35))) ||
        set_slot(view, S_PRODUCER_ID, PyLong_FromLongLong(producer_id)) ||
        set_slot(view, S_PRODUCER_EPOCH, PyLong_FromLong(rd16(b + 51))) ||
        set_slot(view, S_BASE_SEQUENCE, PyLong_FromLong(base_sequence)) ||
        set_slot(view, S_RECORD_COUNT, PyLong_FromLong(record_count)) ||
        set_slot(view, S_SIZE, PyLong_FromSsize_t(size))) {
        Py_DECREF(view); /* the slots set so far go with it */
        return NULL;
    }
    return view;
}

/* ---- any_transactional ---------------------------------------------------------------------- */

static PyObject *str_partition_data = NULL;
static PyObject *str_records = NULL;

static PyObject *any_transactional(PyObject *self, PyObject *topic_data) {
    if (!PyList_CheckExact(topic_data))
        Py_RETURN_NONE;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(topic_data); i++) {
        PyObject *td = PyList_GET_ITEM(topic_data, i);
        if (!PyDict_CheckExact(td))
            Py_RETURN_NONE;
        PyObject *parts = PyDict_GetItemWithError(td, str_partition_data);
        if (parts == NULL) {
            if (PyErr_Occurred())
                return NULL;
            Py_RETURN_NONE; /* a KeyError for Python to raise */
        }
        if (parts == Py_None)
            continue;
        if (!PyList_CheckExact(parts))
            Py_RETURN_NONE;
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(parts); j++) {
            PyObject *pd = PyList_GET_ITEM(parts, j);
            if (!PyDict_CheckExact(pd))
                Py_RETURN_NONE;
            PyObject *raw = PyDict_GetItemWithError(pd, str_records);
            if (raw == NULL) {
                if (PyErr_Occurred())
                    return NULL;
                continue; /* pd.get("records") is None */
            }
            if (raw == Py_None)
                continue;
            const unsigned char *b;
            Py_ssize_t n, at;
            PyObject *owner;
            if (!bytes_of(raw, &b, &n, &owner, &at))
                Py_RETURN_NONE;
            if (n >= HEADER_SIZE && b[16] == 2 && b[22] & TRANSACTIONAL_FLAG)
                Py_RETURN_TRUE;
        }
    }
    Py_RETURN_FALSE;
}

/* ---- parse_body ----------------------------------------------------------------------------- */

typedef struct {
    const unsigned char *buf;
    Py_ssize_t pos;
    Py_ssize_t end;
    int ok;
} Reader;

static inline int need(Reader *r, Py_ssize_t n) {
    if (!r->ok || n < 0 || r->end - r->pos < n) {
        r->ok = 0;
        return 0;
    }
    return 1;
}

static inline int32_t r_i32(Reader *r) {
    if (!need(r, 4))
        return 0;
    int32_t v = rd32(r->buf + r->pos);
    r->pos += 4;
    return v;
}

static inline int16_t r_i16(Reader *r) {
    if (!need(r, 2))
        return 0;
    int16_t v = rd16(r->buf + r->pos);
    r->pos += 2;
    return v;
}

/* An unsigned varint of at most 4 bytes (< 2**28: more than any length a frame can hold); a
 * longer one is left to the generic decoder. */
static inline int64_t r_uvarint(Reader *r) {
    uint32_t v = 0;
    for (int shift = 0; shift < 28; shift += 7) {
        if (!need(r, 1))
            return -1;
        unsigned char c = r->buf[r->pos++];
        v |= (uint32_t)(c & 0x7F) << shift;
        if (!(c & 0x80))
            return v;
    }
    r->ok = 0;
    return -1;
}

/* a length: flexible (compact, n + 1, 0 for null) or int16/int32; -1 for null, -2 on failure */
static inline Py_ssize_t r_len(Reader *r, int flexible, int wide) {
    if (flexible) {
        int64_t n = r_uvarint(r);
        if (!r->ok)
            return -2;
        return (Py_ssize_t)n - 1;
    }
    Py_ssize_t n = wide ? r_i32(r) : r_i16(r);
    if (!r->ok || n < -1) {
        r->ok = 0;
        return -2;
    }
    return n;
}

static PyObject *r_str(Reader *r, Py_ssize_t n) {
    if (!need(r, n))
        return NULL;
    PyObject *s = PyUnicode_DecodeUTF8((const char *)r->buf + r->pos, n, NULL);
    if (s == NULL) {
        PyErr_Clear();
        r->ok = 0;
        return NULL;
    }
    r->pos += n;
    return s;
}

static PyObject *str_transactional_id, *str_acks, *str_timeout_ms, *str_topic_data, *str_name, *str_index;

/* Records of at least this many bytes are handed as a memoryview of the request's frame, not
 * copied into bytes of their own: a producer's ~20 KB batches were copied once more here than the
 * log needs (it writes them from the frame: check_batch's BatchView reads them where they lie). */
#define VIEW_MIN 4096

/* The body, or NULL with r->ok == 0 (declined) or an exception set (r->ok == 1). */
static PyObject *read_body(Reader *r, int flexible, PyObject *frame) {
    PyObject *fview = NULL; /* a memoryview of the whole frame, made for the first large records */
    PyObject *body = NULL, *topics = NULL, *tid = NULL;
    Py_ssize_t n = r_len(r, flexible, 0);
    if (n == -2)
        return NULL;
    if (n == -1) {
        tid = Py_NewRef(Py_None);
    } else if ((tid = r_str(r, n)) == NULL) {
        return NULL;
    }
    int16_t acks = r_i16(r);
    int32_t timeout = r_i32(r);
    Py_ssize_t ntopics = r_len(r, flexible, 1);
    if (ntopics < 0 || ntopics > r->end - r->pos) { /* null or implausible: the generic decoder's */
        r->ok = 0;
        goto fail;
    }
    topics = PyList_New(ntopics);
    if (topics == NULL)
        goto fail;
    for (Py_ssize_t t = 0; t < ntopics; t++) {
        Py_ssize_t len = r_len(r, flexible, 0);
        if (len < 0) {
            r->ok = 0;
            goto fail;
        }
        PyObject *name = r_str(r, len);
        if (name == NULL)
            goto fail;
        PyObject *td = PyDict_New();
        if (td == NULL) {
            Py_DECREF(name);
            goto fail;
        }
        PyList_SET_ITEM(topics, t, td);
        int err = PyDict_SetItem(td, str_name, name);
        Py_DECREF(name);
        if (err)
            goto fail;
        Py_ssize_t nparts = r_len(r, flexible, 1);
        if (nparts < 0 || nparts > r->end - r->pos) {
            r->ok = 0;
            goto fail;
        }
        PyObject *parts = PyList_New(nparts);
        if (parts == NULL)
            goto fail;
        err = PyDict_SetItem(td, str_partition_data, parts);
        Py_DECREF(parts);
        if (err)
            goto fail;
        for (Py_ssize_t p = 0; p < nparts; p++) {
            int32_t index = r_i32(r);
            Py_ssize_t size = r_len(r, flexible, 1);
            if (size == -2 || (size >= 0 && !need(r, size))) {
                r->ok = 0;
                goto fail;
            }
            PyObject *records;
            if (size == -1) {
                records = Py_NewRef(Py_None);
            } else if (size >= VIEW_MIN && frame != NULL) {
                if (fview == NULL && (fview = PyMemoryView_FromObject(frame)) == NULL)
                    goto fail;
                records = PySequence_GetSlice(fview, r->pos, r->pos + size);
                r->pos += size;
            } else {
                records = PyBytes_FromStringAndSize((const char *)r->buf + r->pos, size);
                r->pos += size;
            }
            if (flexible && r_uvarint(r) != 0) { /* the partition's tagged fields: none taken here */
                Py_XDECREF(records);
                r->ok = 0;
                goto fail;
            }
            PyObject *pd = PyDict_New();
            PyObject *idx = PyLong_FromLong(index);
            if (records == NULL || pd == NULL || idx == NULL || PyDict_SetItem(pd, str_index, idx) ||
                PyDict_SetItem(pd, str_records, records)) {
                Py_XDECREF(records);
                Py_XDECREF(pd);
                Py_XDECREF(idx);
                goto fail;
            }
            Py_DECREF(records);
            Py_DECREF(idx);
            PyList_SET_ITEM(parts, p, pd);
        }
        if (flexible && r_uvarint(r) != 0) {
            r->ok = 0;
            goto fail;
        }
    }
    if (flexible && r_uvarint(r) != 0) {
        r->ok = 0;
        goto fail;
    }
    if (!r->ok)
        goto fail;
    body = PyDict_New();
    if (body == NULL)
        goto fail;
    PyObject *a = PyLong_FromLong(acks), *to = PyLong_FromLong(timeout);
    if (a == NULL || to == NULL || PyDict_SetItem(body, str_transactional_id, tid) ||
        PyDict_SetItem(body, str_acks, a) || PyDict_SetItem(body, str_timeout_ms, to) ||
        PyDict_SetItem(body, str_topic_data, topics)) {
        Py_XDECREF(a);
        Py_XDECREF(to);
        Py_CLEAR(body);
        goto fail;
    }
    Py_DECREF(a);
    Py_DECREF(to);
    Py_DECREF(tid);
    Py_DECREF(topics);
    Py_XDECREF(fview);
    return body;
fail:
    Py_XDECREF(tid);
    Py_XDECREF(topics);
    Py_XDECREF(fview);
    return NULL;
}

static PyObject *parse_body(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "parse_body(version, generic, frame, pos)");
        return NULL;
    }
    long version = PyLong_AsLong(args[0]);
    Py_ssize_t pos = PyLong_AsSsize_t(args[3]);
    if (PyErr_Occurred())
        return NULL;
    PyObject *frame = args[2];
    if (version >= 3 && version <= 12 && PyBytes_CheckExact(frame) && pos >= 0 && pos <= PyBytes_GET_SIZE(frame)) {
        Reader r = {(const unsigned char *)PyBytes_AS_STRING(frame), pos, PyBytes_GET_SIZE(frame), 1};
        PyObject *body = read_body(&r, version >= 9, frame);
        if (body != NULL) {
            PyObject *end = PyLong_FromSsize_t(r.pos);
            if (end == NULL) {
                Py_DECREF(body);
                return NULL;
            }
            PyObject *out = PyTuple_Pack(2, body, end);
            Py_DECREF(body);
            Py_DECREF(end);
            return out;
        }
        if (r.ok) /* an exception (memory) rather than a decline */
            return NULL;
    }
    PyObject *call_args[2] = {args[2], args[3]};
    return PyObject_Vectorcall(args[1], call_args, 2, NULL);
}

/* ---- encode_answer -------------------------------------------------------------------------- */

typedef struct {
    char *buf;
    Py_ssize_t len;
    Py_ssize_t cap;
} Out;

static int grow(Out *o, Py_ssize_t n) {
    if (o->len + n <= o->cap)
        return 0;
    Py_ssize_t cap = (o->cap + n) * 2;
    char *nb = PyMem_Realloc(o->buf, cap);
    if (nb == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->buf = nb;
    o->cap = cap;
    return 0;
}

static inline void w64(Out *o, int64_t v) {
    for (int i = 7; i >= 0; i--)
        o->buf[o->len++] = (char)((uint64_t)v >> (8 * i));
}
static inline void w32(Out *o, int32_t v) {
    for (int i = 3; i >= 0; i--)
        o->buf[o->len++] = (char)((uint32_t)v >> (8 * i));
}
static inline void w16(Out *o, int16_t v) {
    o->buf[o->len++] = (char)((uint16_t)v >> 8);
    o->buf[o->len++] = (char)v;
}
static inline void wuv(Out *o, uint64_t v) {
    while (v >= 0x80) {
        o->buf[o->len++] = (char)((v & 0x7F) | 0x80);
        v >>= 7;
    }
    o->buf[o->len++] = (char)v;
}

static int as_i64(PyObject *v, int64_t *out) {
    if (!PyLong_CheckExact(v))
        return -1;
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return -1;
    }
    *out = x;
    return 0;
}

static PyObject *encode_answer(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "encode_answer(version, answers)");
        return NULL;
    }
    long version = PyLong_AsLong(args[0]);
    if (version == -1 && PyErr_Occurred())
        return NULL;
    PyObject *answers = args[1];
    if (version < 3 || version > 12 || !PyList_CheckExact(answers))
        Py_RETURN_NONE;
    int flexible = version >= 9;
    Out o = {NULL, 0, 0};
    Py_ssize_t ntopics = PyList_GET_SIZE(answers);
    if (grow(&o, 16))
        return NULL;
    if (flexible)
        wuv(&o, (uint64_t)ntopics + 1);
    else
        w32(&o, (int32_t)ntopics);
    for (Py_ssize_t t = 0; t < ntopics; t++) {
        PyObject *item = PyList_GET_ITEM(answers, t);
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 2)
            goto decline;
        PyObject *name = PyTuple_GET_ITEM(item, 0), *outs = PyTuple_GET_ITEM(item, 1);
        if (!PyUnicode_CheckExact(name) || !PyList_CheckExact(outs))
            goto decline;
        Py_ssize_t nlen;
        const char *raw = PyUnicode_AsUTF8AndSize(name, &nlen);
        if (raw == NULL) {
            PyErr_Clear();
            goto decline;
        }
        if (!flexible && nlen > 32767)
            goto decline;
        Py_ssize_t nparts = PyList_GET_SIZE(outs);
        if (grow(&o, nlen + 16 + nparts * 40))
            goto error;
        if (flexible)
            wuv(&o, (uint64_t)nlen + 1);
        else
            w16(&o, (int16_t)nlen);
        memcpy(o.buf + o.len, raw, nlen);
        o.len += nlen;
        if (flexible)
            wuv(&o, (uint64_t)nparts + 1);
        else
            w32(&o, (int32_t)nparts);
        for (Py_ssize_t p = 0; p < nparts; p++) {
            PyObject *s = PyList_GET_ITEM(outs, p);
            if (!PyTuple_CheckExact(s) || PyTuple_GET_SIZE(s) != 4)
                goto decline;
            int64_t index, base, lat, lso;
            if (as_i64(PyTuple_GET_ITEM(s, 0), &index) || as_i64(PyTuple_GET_ITEM(s, 1), &base) ||
                as_i64(PyTuple_GET_ITEM(s, 2), &lat) || as_i64(PyTuple_GET_ITEM(s, 3), &lso) ||
                index < INT32_MIN || index > INT32_MAX)
                goto decline;
            w32(&o, (int32_t)index);
            w16(&o, 0);
            w64(&o, base);
            w64(&o, lat);
            if (version >= 5)
                w64(&o, lso);
            if (flexible) {
                o.buf[o.len++] = 1; /* record_errors: empty compact array */
                o.buf[o.len++] = 0; /* error_message: null */
                o.buf[o.len++] = 0; /* no tagged fields */
            } else if (version >= 8) {
                w32(&o, 0);  /* record_errors: empty */
                w16(&o, -1); /* error_message: null */
            }
        }
        if (flexible)
            o.buf[o.len++] = 0; /* the topic's tagged fields */
    }
    if (grow(&o, 8))
        goto error;
    w32(&o, 0); /* throttle_time_ms */
    if (flexible)
        o.buf[o.len++] = 0;
    PyObject *out = PyBytes_FromStringAndSize(o.buf, o.len);
    PyMem_Free(o.buf);
    return out;
decline:
    PyMem_Free(o.buf);
    Py_RETURN_NONE;
error:
    PyMem_Free(o.buf);
    return NULL;
}

/* ---- module --------------------------------------------------------------------------------- */

static PyMethodDef methods[] = {
    {"bind", (PyCFunction)(void (*)(void))bind, METH_FASTCALL, "bind(BatchView, crc32c): what check_batch builds and uses"},
    {"check_batch", (PyCFunction)(void (*)(void))check_batch, METH_FASTCALL,
     "check_batch(raw, max_bytes, version) -> BatchView | None"},
    {"any_transactional", (PyCFunction)any_transactional, METH_O, "any_transactional(topic_data) -> bool | None"},
    {"parse_body", (PyCFunction)(void (*)(void))parse_body, METH_FASTCALL,
     "parse_body(version, generic, frame, pos) -> (body, end)"},
    {"encode_answer", (PyCFunction)(void (*)(void))encode_answer, METH_FASTCALL,
     "encode_answer(version, answers) -> bytes | None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "groupd.broker.data_plane._produce", "Produce's per-request steps in C.", -1, methods,
};

PyMODINIT_FUNC PyInit__produce(void) {
#define INTERN(var, s)                                                                                               \
    if ((var = PyUnicode_InternFromString(s)) == NULL)                                                               \
        return NULL;
    INTERN(str_partition_data, "partition_data");
    INTERN(str_records, "records");
    INTERN(str_transactional_id, "transactional_id");
    INTERN(str_acks, "acks");
    INTERN(str_timeout_ms, "timeout_ms");
    INTERN(str_topic_data, "topic_data");
    INTERN(str_name, "name");
    INTERN(str_index, "index");
#undef INTERN
    small_zero = PyLong_FromLong(0);
    if (small_zero == NULL)
        return NULL;
    return PyModule_Create(&module_def);
}
