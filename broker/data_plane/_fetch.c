/* groupd.broker.data_plane._fetch: a Fetch request read and its answer written, in C.
 *
 * franz-go's consumers on three brokers send ~40k small Fetch requests in TestGroupETL (issue 29
 * item 4): incremental fetches of a KIP-227 session naming one or two partitions, answered a few
 * records each. The generic codecs (groupd.protocol's generated Python) cost ~2.8 us to read such a
 * request and ~4.5 us to write its answer, a fifth of the server's whole cost of the request. Here:
 *
 *   parse_fetch(frame, pos, version)  the request body of Fetch v4-12, the same dict the generic
 *       decoder makes (same keys, same order); None for anything it does not take (tagged fields,
 *       null arrays or strings, truncation, bad UTF-8): the generic decoder then decides, so a
 *       request is refused exactly as before.
 *   build_fetch(body, version)  the response body of Fetch v4-12 as the generic encoder writes it
 *       (the same defaults for missing keys); None for anything it does not take (a tagged field
 *       of a partition: diverging_epoch, current_leader, snapshot_id; a value of another type or
 *       out of range; a dict or list subclass): the generic encoder then writes it or raises.
 *
 * The generic codecs stay the reference: tests/broker/test_fetch_native.py compares both on
 * random bodies (hypothesis) and feeds parse_fetch random and truncated bytes. Every read is
 * bounds-checked against the buffer's length; build_fetch measures the answer first and writes
 * it into one bytes object of that size.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

/* ---- reading ------------------------------------------------------------------------------- */

typedef struct {
    const unsigned char *buf;
    Py_ssize_t pos;
    Py_ssize_t end;
    int ok; /* 0 once a read failed or met what it does not take: the caller answers None */
} Reader;

static inline int need(Reader *r, Py_ssize_t n) {
    if (!r->ok || n < 0 || r->end - r->pos < n) {
        r->ok = 0;
        return 0;
    }
    return 1;
}

static inline int8_t rd8(Reader *r) {
    if (!need(r, 1)) return 0;
    return (int8_t)r->buf[r->pos++];
}

static inline int16_t rd16(Reader *r) {
    if (!need(r, 2)) return 0;
    const unsigned char *p = r->buf + r->pos;
    r->pos += 2;
    return (int16_t)(((uint16_t)p[0] << 8) | p[1]);
}

static inline int32_t rd32(Reader *r) {
    if (!need(r, 4)) return 0;
    const unsigned char *p = r->buf + r->pos;
    r->pos += 4;
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}

static inline int64_t rd64(Reader *r) {
    if (!need(r, 8)) return 0;
    const unsigned char *p = r->buf + r->pos;
    r->pos += 8;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
    return (int64_t)v;
}

/* An unsigned varint of at most 5 bytes (a 32-bit value); anything longer is not taken. */
static inline uint32_t rduvar(Reader *r) {
    uint32_t v = 0;
    for (int shift = 0; shift < 35; shift += 7) {
        if (!need(r, 1)) return 0;
        unsigned char b = r->buf[r->pos++];
        v |= (uint32_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
    }
    r->ok = 0;
    return 0;
}

/* An array's element count; -1 (not taken) for null, or more elements than bytes left. */
static inline Py_ssize_t rdcount(Reader *r, int flex) {
    int64_t n;
    if (flex) {
        n = (int64_t)rduvar(r) - 1;
    } else {
        n = rd32(r);
    }
    if (!r->ok || n < 0 || n > r->end - r->pos) {
        r->ok = 0;
        return -1;
    }
    return (Py_ssize_t)n;
}

/* A non-nullable string (None: not taken, with no exception set). */
static PyObject *rdstr(Reader *r, int flex) {
    int64_t n = flex ? (int64_t)rduvar(r) - 1 : rd16(r);
    if (!r->ok || n < 0 || !need(r, (Py_ssize_t)n)) {
        r->ok = 0;
        return NULL;
    }
    PyObject *s = PyUnicode_DecodeUTF8((const char *)r->buf + r->pos, (Py_ssize_t)n, "strict");
    if (s == NULL) {
        PyErr_Clear(); /* the generic decoder raises it */
        r->ok = 0;
        return NULL;
    }
    r->pos += (Py_ssize_t)n;
    return s;
}

/* An empty tagged-field section; any tagged field is the generic decoder's. */
static inline void rdtags(Reader *r) {
    if (!need(r, 1)) return;
    if (r->buf[r->pos] != 0) {
        r->ok = 0;
        return;
    }
    r->pos++;
}

static PyObject *s_replica_id, *s_max_wait_ms, *s_min_bytes, *s_max_bytes, *s_isolation_level, *s_session_id,
    *s_session_epoch, *s_topics, *s_topic, *s_partitions, *s_partition, *s_current_leader_epoch, *s_fetch_offset,
    *s_last_fetched_epoch, *s_log_start_offset, *s_partition_max_bytes, *s_forgotten_topics_data, *s_rack_id,
    *s_cluster_id, *s_throttle_time_ms, *s_error_code, *s_responses, *s_partition_index, *s_high_watermark,
    *s_last_stable_offset, *s_aborted_transactions, *s_producer_id, *s_first_offset, *s_preferred_read_replica,
    *s_records, *s_diverging_epoch, *s_current_leader, *s_snapshot_id;

/* dict[key] = value, value's reference stolen; 0 on failure (an exception is set) */
static inline int put(PyObject *d, PyObject *key, PyObject *value) {
    if (value == NULL) return 0;
    int rc = PyDict_SetItem(d, key, value);
    Py_DECREF(value);
    return rc == 0;
}

#define PUT_INT(d, key, v) put((d), (key), PyLong_FromLongLong((long long)(v)))

/* One partition entry of a request topic; NULL with no exception: not taken. */
static PyObject *rd_partition(Reader *r, int v) {
    int flex = v >= 12;
    int32_t partition = rd32(r);
    int32_t current_leader_epoch = v >= 9 ? rd32(r) : 0;
    int64_t fetch_offset = rd64(r);
    int32_t last_fetched_epoch = v >= 12 ? rd32(r) : 0;
    int64_t log_start_offset = v >= 5 ? rd64(r) : 0;
    int32_t partition_max_bytes = rd32(r);
    if (flex) rdtags(r);
    if (!r->ok) return NULL;
    PyObject *d = PyDict_New();
    if (d == NULL) return NULL;
    if (!PUT_INT(d, s_partition, partition)) goto fail;
    if (v >= 9 && !PUT_INT(d, s_current_leader_epoch, current_leader_epoch)) goto fail;
    if (!PUT_INT(d, s_fetch_offset, fetch_offset)) goto fail;
    if (v >= 12 && !PUT_INT(d, s_last_fetched_epoch, last_fetched_epoch)) goto fail;
    if (v >= 5 && !PUT_INT(d, s_log_start_offset, log_start_offset)) goto fail;
    if (!PUT_INT(d, s_partition_max_bytes, partition_max_bytes)) goto fail;
    return d;
fail:
    Py_DECREF(d);
    return NULL;
}

/* A topic entry: {topic, partitions}; forgotten: partitions is a list of int32. */
static PyObject *rd_topic(Reader *r, int v, int forgotten) {
    int flex = v >= 12;
    PyObject *name = rdstr(r, flex);
    if (name == NULL) return NULL;
    Py_ssize_t n = rdcount(r, flex);
    if (n < 0) {
        Py_DECREF(name);
        return NULL;
    }
    PyObject *parts = PyList_New(n);
    if (parts == NULL) {
        Py_DECREF(name);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = forgotten ? (r->ok ? PyLong_FromLong(rd32(r)) : NULL) : rd_partition(r, v);
        if (p != NULL && !r->ok) Py_CLEAR(p);
        if (p == NULL) {
            Py_DECREF(name);
            Py_DECREF(parts);
            return NULL;
        }
        PyList_SET_ITEM(parts, i, p);
    }
    if (flex) rdtags(r);
    PyObject *d = r->ok ? PyDict_New() : NULL;
    if (d == NULL) {
        Py_DECREF(name);
        Py_DECREF(parts);
        return NULL;
    }
    if (!put(d, s_topic, name)) { /* put released name */
        Py_DECREF(parts);
        Py_DECREF(d);
        return NULL;
    }
    if (!put(d, s_partitions, parts)) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

static PyObject *rd_topics(Reader *r, int v, int forgotten) {
    Py_ssize_t n = rdcount(r, v >= 12);
    if (n < 0) return NULL;
    PyObject *list = PyList_New(n);
    if (list == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = rd_topic(r, v, forgotten);
        if (t == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, t);
    }
    return list;
}

static PyObject *parse_fetch(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos;
    int v;
    if (!PyArg_ParseTuple(args, "y*ni", &view, &pos, &v)) return NULL;
    PyObject *result = NULL;
    PyObject *d = NULL;
    if (v < 4 || v > 12 || pos < 0 || pos > view.len) goto none;
    Reader r = {(const unsigned char *)view.buf, pos, view.len, 1};
    int flex = v >= 12;
    int32_t replica_id = rd32(&r), max_wait_ms = rd32(&r), min_bytes = rd32(&r), max_bytes = rd32(&r);
    int8_t isolation_level = rd8(&r);
    int32_t session_id = v >= 7 ? rd32(&r) : 0, session_epoch = v >= 7 ? rd32(&r) : 0;
    if (!r.ok) goto none;
    d = PyDict_New();
    if (d == NULL) goto done;
    if (!PUT_INT(d, s_replica_id, replica_id) || !PUT_INT(d, s_max_wait_ms, max_wait_ms) ||
        !PUT_INT(d, s_min_bytes, min_bytes) || !PUT_INT(d, s_max_bytes, max_bytes) ||
        !PUT_INT(d, s_isolation_level, isolation_level))
        goto done;
    if (v >= 7 && (!PUT_INT(d, s_session_id, session_id) || !PUT_INT(d, s_session_epoch, session_epoch))) goto done;
    PyObject *topics = rd_topics(&r, v, 0);
    if (topics == NULL) goto none_or_error;
    if (!put(d, s_topics, topics)) goto done;
    if (v >= 7) {
        PyObject *forgotten = rd_topics(&r, v, 1);
        if (forgotten == NULL) goto none_or_error;
        if (!put(d, s_forgotten_topics_data, forgotten)) goto done;
    }
    if (v >= 11) {
        PyObject *rack = rdstr(&r, flex);
        if (rack == NULL) goto none_or_error;
        if (!put(d, s_rack_id, rack)) goto done;
    }
    if (flex) {
        Py_INCREF(Py_None);
        if (!put(d, s_cluster_id, Py_None)) goto done;
        rdtags(&r);
    }
    if (!r.ok) goto none;
    result = Py_BuildValue("(On)", d, r.pos);
    goto done;
none_or_error:
    if (PyErr_Occurred()) goto done;
none:
    result = Py_None;
    Py_INCREF(result);
done:
    Py_XDECREF(d);
    PyBuffer_Release(&view);
    return result;
}

/* ---- writing ------------------------------------------------------------------------------- */

/* Two passes over the body: the first (p == NULL) measures and checks, the second writes. */
typedef struct {
    char *p;
    Py_ssize_t n;
} W;

static inline void wbytes(W *w, const void *src, Py_ssize_t len) {
    if (w->p) memcpy(w->p + w->n, src, (size_t)len);
    w->n += len;
}

static inline void w8(W *w, uint8_t v) {
    if (w->p) w->p[w->n] = (char)v;
    w->n += 1;
}

static inline void w16(W *w, int16_t v) {
    unsigned char b[2] = {(unsigned char)((uint16_t)v >> 8), (unsigned char)v};
    wbytes(w, b, 2);
}

static inline void w32(W *w, int32_t v) {
    uint32_t u = (uint32_t)v;
    unsigned char b[4] = {(unsigned char)(u >> 24), (unsigned char)(u >> 16), (unsigned char)(u >> 8),
                          (unsigned char)u};
    wbytes(w, b, 4);
}

static inline void w64(W *w, int64_t v) {
    uint64_t u = (uint64_t)v;
    unsigned char b[8];
    for (int i = 7; i >= 0; i--) {
        b[i] = (unsigned char)u;
        u >>= 8;
    }
    wbytes(w, b, 8);
}

static inline void wuvar(W *w, uint64_t v) {
    while (v >= 0x80) {
        w8(w, (uint8_t)(v | 0x80));
        v >>= 7;
    }
    w8(w, (uint8_t)v);
}

/* 0: not taken (no exception). The value of `key` in dict `d`, or `dflt` when missing; an int
 * (or int subclass: struct.pack takes those) within [lo, hi]. */
static inline int get_int(PyObject *d, PyObject *key, long long dflt, long long lo, long long hi, long long *out) {
    PyObject *o = PyDict_GetItemWithError(d, key);
    if (o == NULL) {
        if (PyErr_Occurred()) return 0;
        *out = dflt;
        return 1;
    }
    if (!PyLong_Check(o)) return 0;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred()) || x < lo || x > hi) {
        PyErr_Clear();
        return 0;
    }
    *out = x;
    return 1;
}

#define I16 -32768LL, 32767LL
#define I32 -2147483648LL, 2147483647LL
#define I64 LLONG_MIN, LLONG_MAX

static int w_partition(W *w, PyObject *p, int v) {
    int flex = v >= 12;
    if (!PyDict_CheckExact(p)) return 0;
    if (flex && (PyDict_GetItemWithError(p, s_diverging_epoch) || PyDict_GetItemWithError(p, s_current_leader) ||
                 PyDict_GetItemWithError(p, s_snapshot_id) || PyErr_Occurred()))
        return 0; /* tagged fields: the generic encoder's */
    long long index, error, hw, lso, start, preferred = -1;
    if (!get_int(p, s_partition_index, 0, I32, &index) || !get_int(p, s_error_code, 0, I16, &error) ||
        !get_int(p, s_high_watermark, 0, I64, &hw) || !get_int(p, s_last_stable_offset, -1, I64, &lso) ||
        !get_int(p, s_log_start_offset, -1, I64, &start) ||
        (v >= 11 && !get_int(p, s_preferred_read_replica, -1, I32, &preferred)))
        return 0;
    w32(w, (int32_t)index);
    w16(w, (int16_t)error);
    w64(w, hw);
    w64(w, lso);
    if (v >= 5) w64(w, start);
    PyObject *aborted = PyDict_GetItemWithError(p, s_aborted_transactions);
    if (aborted == NULL && PyErr_Occurred()) return 0;
    if (aborted == NULL) { /* the generic default: an empty array */
        if (flex)
            w8(w, 1);
        else
            w32(w, 0);
    } else if (aborted == Py_None) {
        if (flex)
            w8(w, 0);
        else
            w32(w, -1);
    } else {
        if (!PyList_CheckExact(aborted)) return 0;
        Py_ssize_t n = PyList_GET_SIZE(aborted);
        if (n > INT32_MAX - 1) return 0;
        if (flex)
            wuvar(w, (uint64_t)n + 1);
        else
            w32(w, (int32_t)n);
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *a = PyList_GET_ITEM(aborted, i);
            long long pid, first;
            if (!PyDict_CheckExact(a) || !get_int(a, s_producer_id, 0, I64, &pid) ||
                !get_int(a, s_first_offset, 0, I64, &first))
                return 0;
            w64(w, pid);
            w64(w, first);
            if (flex) w8(w, 0);
        }
    }
    if (v >= 11) w32(w, (int32_t)preferred);
    PyObject *records = PyDict_GetItemWithError(p, s_records);
    if (records == NULL && PyErr_Occurred()) return 0;
    if (records == NULL || records == Py_None) {
        if (flex)
            w8(w, 0);
        else
            w32(w, -1);
    } else {
        const char *data;
        Py_ssize_t len;
        if (PyBytes_CheckExact(records)) {
            data = PyBytes_AS_STRING(records);
            len = PyBytes_GET_SIZE(records);
        } else if (PyByteArray_CheckExact(records)) {
            data = PyByteArray_AS_STRING(records);
            len = PyByteArray_GET_SIZE(records);
        } else {
            return 0;
        }
        if (len > INT32_MAX - 1) return 0;
        if (flex)
            wuvar(w, (uint64_t)len + 1);
        else
            w32(w, (int32_t)len);
        wbytes(w, data, len);
    }
    if (flex) w8(w, 0);
    return 1;
}

static int w_body(W *w, PyObject *body, int v) {
    int flex = v >= 12;
    if (!PyDict_CheckExact(body)) return 0;
    long long throttle, error = 0, session = 0;
    if (!get_int(body, s_throttle_time_ms, 0, I32, &throttle)) return 0;
    if (v >= 7 && (!get_int(body, s_error_code, 0, I16, &error) || !get_int(body, s_session_id, 0, I32, &session)))
        return 0;
    w32(w, (int32_t)throttle);
    if (v >= 7) {
        w16(w, (int16_t)error);
        w32(w, (int32_t)session);
    }
    PyObject *responses = PyDict_GetItemWithError(body, s_responses);
    if (responses == NULL && PyErr_Occurred()) return 0;
    Py_ssize_t nt = 0;
    if (responses != NULL && responses != Py_None) {
        if (!PyList_CheckExact(responses)) return 0;
        nt = PyList_GET_SIZE(responses);
    }
    if (nt > INT32_MAX - 1) return 0;
    if (flex)
        wuvar(w, (uint64_t)nt + 1);
    else
        w32(w, (int32_t)nt);
    for (Py_ssize_t i = 0; i < nt; i++) {
        PyObject *t = PyList_GET_ITEM(responses, i);
        if (!PyDict_CheckExact(t)) return 0;
        PyObject *name = PyDict_GetItemWithError(t, s_topic);
        if (name == NULL && PyErr_Occurred()) return 0;
        const char *utf8 = "";
        Py_ssize_t len = 0;
        if (name != NULL && name != Py_None) {
            if (!PyUnicode_Check(name)) return 0;
            utf8 = PyUnicode_AsUTF8AndSize(name, &len);
            if (utf8 == NULL) {
                PyErr_Clear();
                return 0;
            }
        }
        if (flex) {
            wuvar(w, (uint64_t)len + 1);
        } else {
            if (len > 32767) return 0;
            w16(w, (int16_t)len);
        }
        wbytes(w, utf8, len);
        PyObject *parts = PyDict_GetItemWithError(t, s_partitions);
        if (parts == NULL && PyErr_Occurred()) return 0;
        Py_ssize_t np = 0;
        if (parts != NULL && parts != Py_None) {
            if (!PyList_CheckExact(parts)) return 0;
            np = PyList_GET_SIZE(parts);
        }
        if (np > INT32_MAX - 1) return 0;
        if (flex)
            wuvar(w, (uint64_t)np + 1);
        else
            w32(w, (int32_t)np);
        for (Py_ssize_t j = 0; j < np; j++) {
            if (!w_partition(w, PyList_GET_ITEM(parts, j), v)) return 0;
        }
        if (flex) w8(w, 0);
    }
    if (flex) w8(w, 0);
    return 1;
}

static PyObject *build_fetch(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *body;
    int v;
    if (!PyArg_ParseTuple(args, "Oi", &body, &v)) return NULL;
    if (v < 4 || v > 12) Py_RETURN_NONE;
    W measure = {NULL, 0};
    if (!w_body(&measure, body, v)) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, measure.n);
    if (out == NULL) return NULL;
    W write = {PyBytes_AS_STRING(out), 0};
    /* The same walk over the same objects (nothing ran Python code in between): it cannot fail. */
    if (!w_body(&write, body, v) || write.n != measure.n) {
        Py_DECREF(out);
        if (PyErr_Occurred()) return NULL;
        PyErr_SetString(PyExc_RuntimeError, "build_fetch: the body changed while it was written");
        return NULL;
    }
    return out;
}

static PyMethodDef methods[] = {
    {"parse_fetch", parse_fetch, METH_VARARGS, "parse_fetch(frame, pos, version) -> (body, end) | None"},
    {"build_fetch", build_fetch, METH_VARARGS, "build_fetch(body, version) -> bytes | None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fetch", NULL, -1, methods};

#define INTERN(var, text)                                \
    do {                                                 \
        if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL; \
    } while (0)

PyMODINIT_FUNC PyInit__fetch(void) {
    INTERN(s_replica_id, "replica_id");
    INTERN(s_max_wait_ms, "max_wait_ms");
    INTERN(s_min_bytes, "min_bytes");
    INTERN(s_max_bytes, "max_bytes");
    INTERN(s_isolation_level, "isolation_level");
    INTERN(s_session_id, "session_id");
    INTERN(s_session_epoch, "session_epoch");
    INTERN(s_topics, "topics");
    INTERN(s_topic, "topic");
    INTERN(s_partitions, "partitions");
    INTERN(s_partition, "partition");
    INTERN(s_current_leader_epoch, "current_leader_epoch");
    INTERN(s_fetch_offset, "fetch_offset");
    INTERN(s_last_fetched_epoch, "last_fetched_epoch");
    INTERN(s_log_start_offset, "log_start_offset");
    INTERN(s_partition_max_bytes, "partition_max_bytes");
    INTERN(s_forgotten_topics_data, "forgotten_topics_data");
    INTERN(s_rack_id, "rack_id");
    INTERN(s_cluster_id, "cluster_id");
    INTERN(s_throttle_time_ms, "throttle_time_ms");
    INTERN(s_error_code, "error_code");
    INTERN(s_responses, "responses");
    INTERN(s_partition_index, "partition_index");
    INTERN(s_high_watermark, "high_watermark");
    INTERN(s_last_stable_offset, "last_stable_offset");
    INTERN(s_aborted_transactions, "aborted_transactions");
    INTERN(s_producer_id, "producer_id");
    INTERN(s_first_offset, "first_offset");
    INTERN(s_preferred_read_replica, "preferred_read_replica");
    INTERN(s_records, "records");
    INTERN(s_diverging_epoch, "diverging_epoch");
    INTERN(s_current_leader, "current_leader");
    INTERN(s_snapshot_id, "snapshot_id");
    return PyModule_Create(&module);
}
