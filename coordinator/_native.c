/* groupd.coordinator._native: the per-partition loop of OffsetCommit, in C.
 *
 * A consumer commits its whole assignment (a hundred partitions) in every OffsetCommit. In Python
 * each partition cost a dict from the request decoder, a pass of OffsetManager.commit, a key and a
 * value object, their bytes, a record frame, a replay and an entry of the response: ~5 us per
 * partition, a 20th of the rate the issue asks for (#26). Here, per request:
 *
 *   parse_commit(frame, pos, version)  walks the request body once, checks it is well formed and
 *       answers its top-level fields and where its topics start; None for anything it does not
 *       take (tagged fields, null arrays, non-canonical varints, truncation, bad UTF-8): the
 *       generic decoder (groupd.protocol) then decides, so a request is refused exactly as before.
 *   build_commit(...)  walks the topics again and does OffsetMetadataManager.commitOffset's
 *       per-partition part: unknown topic/partition, the group's error, the metadata size limit,
 *       the value (leader epoch, commit timestamp); it returns the response body, the record batch
 *       of the commit's records (what build_batch(encode_log_records(...)) makes) and the
 *       ((topic, partition), OffsetCommitValue) pairs the replay folds into the offsets map. The
 *       group checks stay in Python: build_commit calls `validate()` once, where the Python path
 *       does.
 *
 *   steady_consumer_heartbeat(...)  reads a steady ConsumerGroupHeartbeat body (ids and epoch
 *       only) as coordinator/consumer_wire.py's steady reader does (tests/coordinator/test_consumer_wire.py).
 *   steady_consumer_reader(...)  the same, as the dispatcher's decoder itself, handing a member's
 *       unchanged bytes the body it read from them last time while that body is unchanged.
 *
 * The Python path (coordinator/offsets.py, serde.py, storage/records.py) stays the reference:
 * tests/coordinator/test_native_commit.py compares both byte for byte and feeds parse_commit
 * random and truncated bytes. Every read is bounds-checked against the buffer's length.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- reading ------------------------------------------------------------------------------- */

typedef struct {
    const unsigned char *buf;
    Py_ssize_t pos;
    Py_ssize_t end;
    int ok; /* 0 once a read failed: the rest of the walk is void */
} Reader;

static inline int need(Reader *r, Py_ssize_t n) {
    if (!r->ok || n < 0 || r->end - r->pos < n) {
        r->ok = 0;
        return 0;
    }
    return 1;
}

/* big-endian <-> host order (the machine's own swap instruction where it has one) */
static inline uint64_t be64(uint64_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return __builtin_bswap64(v);
#else
    return v;
#endif
}

static inline uint32_t be32(uint32_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return __builtin_bswap32(v);
#else
    return v;
#endif
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
    uint64_t v;
    memcpy(&v, r->buf + r->pos, 8);
    r->pos += 8;
    return (int64_t)be64(v);
}

/* An unsigned varint of at most 5 bytes in its shortest form and at most INT32_MAX: anything
 * else is left to the generic decoder (ok = 0). */
static inline int64_t rduvarint(Reader *r) {
    uint64_t v = 0;
    for (int i = 0; i < 5; i++) {
        if (!need(r, 1)) return 0;
        unsigned char b = r->buf[r->pos++];
        v |= (uint64_t)(b & 0x7F) << (7 * i);
        if (!(b & 0x80)) {
            if (i > 0 && b == 0) break; /* not the shortest form */
            if (v > 0x7FFFFFFF) break;
            return (int64_t)v;
        }
    }
    r->ok = 0;
    return 0;
}

/* A string's length (-1: null) in the version's encoding. */
static inline Py_ssize_t rdstrlen(Reader *r, int flexible) {
    if (flexible) return (Py_ssize_t)rduvarint(r) - 1;
    return rd16(r);
}

static inline Py_ssize_t rdarraylen(Reader *r, int flexible) {
    if (flexible) return (Py_ssize_t)rduvarint(r) - 1;
    return rd32(r);
}

/* The empty tagged-field section of a flexible struct (any tag: the generic decoder's call). */
static inline void rdnotags(Reader *r, int flexible) {
    if (flexible && rduvarint(r) != 0) r->ok = 0;
}

/* Whether buf[0:n] is UTF-8 Python's strict decoder accepts (no surrogates, shortest forms). */
static int valid_utf8(const unsigned char *s, Py_ssize_t n, Py_ssize_t *codepoints) {
    Py_ssize_t i = 0, cps = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
        } else if (c >= 0xC2 && c <= 0xDF) {
            if (n - i < 2 || (s[i + 1] & 0xC0) != 0x80) return 0;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (n - i < 3 || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80) return 0;
            if (c == 0xE0 && s[i + 1] < 0xA0) return 0; /* overlong */
            if (c == 0xED && s[i + 1] > 0x9F) return 0; /* surrogate */
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (n - i < 4 || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 || (s[i + 3] & 0xC0) != 0x80)
                return 0;
            if (c == 0xF0 && s[i + 1] < 0x90) return 0; /* overlong */
            if (c == 0xF4 && s[i + 1] > 0x8F) return 0; /* above U+10FFFF */
            i += 4;
        } else {
            return 0;
        }
        cps++;
    }
    if (codepoints) *codepoints = cps;
    return 1;
}

/* A string field: its bytes (start, length; length -1 for null) after checking them. */
static inline int rdstr_cps(Reader *r, int flexible, int nullable, Py_ssize_t *start, Py_ssize_t *len,
                            Py_ssize_t *cps) {
    Py_ssize_t n = rdstrlen(r, flexible);
    if (!r->ok) return 0;
    if (n < 0) {
        if (!nullable || (!flexible && n != -1)) {
            r->ok = 0;
            return 0;
        }
        *start = r->pos;
        *len = -1;
        return 1;
    }
    if (!need(r, n)) return 0;
    if (!valid_utf8(r->buf + r->pos, n, cps)) {
        r->ok = 0;
        return 0;
    }
    *start = r->pos;
    *len = n;
    r->pos += n;
    return 1;
}

static inline int rdstr(Reader *r, int flexible, int nullable, Py_ssize_t *start, Py_ssize_t *len) {
    return rdstr_cps(r, flexible, nullable, start, len, NULL);
}

static PyObject *mkstr(const unsigned char *buf, Py_ssize_t start, Py_ssize_t len) {
    if (len < 0) Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8((const char *)buf + start, len, NULL);
}

/* One partition entry of the request: its fields (metadata as a byte range). */
typedef struct {
    int32_t index;
    int64_t offset;
    int32_t leader_epoch;
    int64_t commit_timestamp;
    Py_ssize_t meta_start;
    Py_ssize_t meta_len; /* -1: null */
    Py_ssize_t meta_cps; /* its code points (0 when null or empty) */
} Part;

static inline __attribute__((always_inline)) void rdpart(Reader *r, int version, int flexible, Part *p) {
    p->index = rd32(r);
    p->offset = rd64(r);
    p->leader_epoch = version >= 6 ? rd32(r) : -1;
    p->commit_timestamp = version == 1 ? rd64(r) : -1;
    p->meta_cps = 0;
    rdstr_cps(r, flexible, 1, &p->meta_start, &p->meta_len, &p->meta_cps);
    rdnotags(r, flexible);
}

/* ---- parse_commit ---------------------------------------------------------------------------- */

static PyObject *parse_commit(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos;
    int version;
    if (!PyArg_ParseTuple(args, "y*ni", &view, &pos, &version)) return NULL;
    PyObject *result = NULL;
    if (version < 0 || version > 9 || pos < 0 || pos > view.len) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    int flexible = version >= 8;
    Reader r = {(const unsigned char *)view.buf, pos, view.len, 1};
    Py_ssize_t gs, gl, ms = 0, ml = 0, is = 0, il = -1;
    int32_t generation = -1;
    int64_t retention = -1;
    rdstr(&r, flexible, 0, &gs, &gl);
    if (version >= 1) {
        generation = rd32(&r);
        rdstr(&r, flexible, 0, &ms, &ml);
    }
    if (version >= 7) rdstr(&r, flexible, 1, &is, &il);
    if (version >= 2 && version <= 4) retention = rd64(&r);
    Py_ssize_t ntopics = rdarraylen(&r, flexible);
    if (ntopics < 0) r.ok = 0;
    Py_ssize_t topics_pos = r.pos;
    for (Py_ssize_t t = 0; r.ok && t < ntopics; t++) {
        Py_ssize_t ns, nl;
        rdstr(&r, flexible, 0, &ns, &nl);
        Py_ssize_t nparts = rdarraylen(&r, flexible);
        if (nparts < 0) r.ok = 0;
        for (Py_ssize_t i = 0; r.ok && i < nparts; i++) {
            Part p;
            rdpart(&r, version, flexible, &p);
        }
        rdnotags(&r, flexible);
    }
    rdnotags(&r, flexible);
    if (!r.ok) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    PyObject *group = mkstr(r.buf, gs, gl);
    PyObject *member = version >= 1 ? mkstr(r.buf, ms, ml) : (Py_INCREF(Py_None), Py_None);
    PyObject *instance = version >= 7 ? mkstr(r.buf, is, il) : (Py_INCREF(Py_None), Py_None);
    if (group && member && instance) {
        result = Py_BuildValue("(nOiOOLnn)", r.pos, group, (int)generation, member, instance, (long long)retention,
                               topics_pos, ntopics);
    }
    Py_XDECREF(group);
    Py_XDECREF(member);
    Py_XDECREF(instance);
done:
    PyBuffer_Release(&view);
    return result;
}

/* ---- writing --------------------------------------------------------------------------------- */

typedef struct {
    unsigned char *data;
    Py_ssize_t len;
    Py_ssize_t cap;
} Buf;

/* The rare path of grow (build_commit sizes its buffers once from the first pass), kept out of
 * line so that the puts below inline to a compare and a copy: as calls they were ~6% of a
 * 50-committer load's CPU (issue 26). */
static __attribute__((noinline)) int grow_slow(Buf *b, Py_ssize_t n) {
    Py_ssize_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n) cap *= 2;
    unsigned char *d = PyMem_Realloc(b->data, cap);
    if (!d) {
        PyErr_NoMemory();
        return 0;
    }
    b->data = d;
    b->cap = cap;
    return 1;
}

static inline __attribute__((always_inline)) int grow(Buf *b, Py_ssize_t n) {
    if (b->len + n <= b->cap) return 1;
    return grow_slow(b, n);
}

static inline __attribute__((always_inline)) int put(Buf *b, const void *src, Py_ssize_t n) {
    if (!grow(b, n)) return 0;
    memcpy(b->data + b->len, src, n);
    b->len += n;
    return 1;
}

static inline __attribute__((always_inline)) int put16(Buf *b, int16_t v) {
    unsigned char s[2] = {(unsigned char)((uint16_t)v >> 8), (unsigned char)v};
    return put(b, s, 2);
}

static inline __attribute__((always_inline)) int put32(Buf *b, int32_t v) {
    uint32_t u = (uint32_t)v;
    unsigned char s[4] = {(unsigned char)(u >> 24), (unsigned char)(u >> 16), (unsigned char)(u >> 8), (unsigned char)u};
    return put(b, s, 4);
}

static inline __attribute__((always_inline)) int put64(Buf *b, int64_t v) {
    unsigned char s[8];
    uint64_t u = (uint64_t)v;
    for (int i = 7; i >= 0; i--) {
        s[i] = (unsigned char)u;
        u >>= 8;
    }
    return put(b, s, 8);
}

static inline __attribute__((always_inline)) int putuvarint(Buf *b, uint64_t v) {
    unsigned char s[10];
    int n = 0;
    while (v >= 0x80) {
        s[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    s[n++] = (unsigned char)v;
    return put(b, s, n);
}

/* Unchecked writers at `o`, returning the end: for a record whose room was grown for at once
 * (its size is known before it is written), a bounds check per field was a third of
 * build_commit's instructions (issue 26). */
static inline __attribute__((always_inline)) unsigned char *w16(unsigned char *o, int16_t v) {
    o[0] = (unsigned char)((uint16_t)v >> 8);
    o[1] = (unsigned char)v;
    return o + 2;
}

static inline __attribute__((always_inline)) unsigned char *w32(unsigned char *o, int32_t v) {
    uint32_t u = be32((uint32_t)v);
    memcpy(o, &u, 4);
    return o + 4;
}

static inline __attribute__((always_inline)) unsigned char *w64(unsigned char *o, int64_t v) {
    uint64_t u = be64((uint64_t)v);
    memcpy(o, &u, 8);
    return o + 8;
}

static inline __attribute__((always_inline)) unsigned char *wuvarint(unsigned char *o, uint64_t v) {
    while (v >= 0x80) {
        *o++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *o++ = (unsigned char)v;
    return o;
}

static inline __attribute__((always_inline)) unsigned char *wzigzag(unsigned char *o, int64_t v) {
    return wuvarint(o, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

static inline int zzsize(int64_t v) {
    uint64_t u = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    int n = 1;
    while (u >= 0x80) {
        u >>= 7;
        n++;
    }
    return n;
}

static inline __attribute__((always_inline)) int putzigzag(Buf *b, int64_t v) {
    return putuvarint(b, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

/* ---- CRC-32C (Castagnoli), slicing by 8 ------------------------------------------------------ */

static uint32_t crc_table[8][256];

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = crc_table[0][i];
        for (int t = 1; t < 8; t++) {
            c = crc_table[0][c & 0xFF] ^ (c >> 8);
            crc_table[t][i] = c;
        }
    }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* The SSE4.2 instruction where the CPU has it (checked once at import): ~8x the table's speed on
 * a commit's ~6 KiB batch. */
#include <nmmintrin.h>
#define HAVE_HW_CRC 1
static int hw_crc;

__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(const unsigned char *p, Py_ssize_t n) {
    uint64_t c = 0xFFFFFFFFu;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--) c32 = _mm_crc32_u8(c32, *p++);
    return c32 ^ 0xFFFFFFFFu;
}
#endif

static uint32_t crc32c_table(const unsigned char *p, Py_ssize_t n);

static uint32_t crc32c(const unsigned char *p, Py_ssize_t n) {
#ifdef HAVE_HW_CRC
    if (hw_crc) return crc32c_hw(p, n);
#endif
    return crc32c_table(p, n);
}

static uint32_t crc32c_table(const unsigned char *p, Py_ssize_t n) {
    uint32_t c = 0xFFFFFFFFu;
    while (n >= 8) {
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
        c = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^ crc_table[5][(lo >> 16) & 0xFF] ^
            crc_table[4][lo >> 24] ^ crc_table[3][hi & 0xFF] ^ crc_table[2][(hi >> 8) & 0xFF] ^
            crc_table[1][(hi >> 16) & 0xFF] ^ crc_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--) c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static PyObject *py_crc32c(PyObject *self, PyObject *args) {
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view)) return NULL;
    uint32_t c = crc32c(view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(c);
}

/* ---- build_commit ---------------------------------------------------------------------------- */

#define UNKNOWN_TOPIC_OR_PARTITION 3
#define OFFSET_METADATA_TOO_LARGE 12
#define STR16_MAX 0x7FFF
#define BATCH_HEADER 61

typedef struct {
    PyObject *name;
    Py_ssize_t name_start, name_len; /* UTF-8 bytes in the request */
    int has_count;
    long long count; /* `topic_partitions(name) or -1` (a dict: `table[name].partitions or -1`) */
    Py_ssize_t parts_pos, nparts; /* its partitions: parts[parts_pos:parts_pos + nparts] */
    PyObject *keys; /* the key cache's list of this topic's keys (a reference; NULL: not looked up yet) */
} Topic;

/* The (topic, partition) key of the offsets map: the same tuple every time for a partition
 * (key_cache: topic -> list of keys by partition index), so that a commit allocates no keys and
 * the fold finds its keys by identity. The cache is dropped whole past a bound (topic churn). */
#define KEY_CACHE_TOPICS 65536
#define KEY_CACHE_INDEX 65536

static PyObject *new_key(Topic *tp, int32_t index) {
    PyObject *i = PyLong_FromLong(index);
    if (!i) return NULL;
    PyObject *key = PyTuple_Pack(2, tp->name, i);
    Py_DECREF(i);
    return key;
}

static PyObject *cached_key(PyObject *cache, Topic *tp, int32_t index) {
    if (index < 0 || index >= KEY_CACHE_INDEX) return new_key(tp, index);
    PyObject *keys = tp->keys;
    if (!keys) {
        /* once per topic of the request, not once per partition (100 lookups of a commit were
         * ~5% of build_commit's time, issue 26) */
        keys = PyDict_GetItemWithError(cache, tp->name); /* borrowed */
        if (!keys) {
            if (PyErr_Occurred()) return NULL;
            if (PyDict_Size(cache) >= KEY_CACHE_TOPICS) PyDict_Clear(cache);
            keys = PyList_New(0);
            if (!keys) return NULL;
            int rc = PyDict_SetItem(cache, tp->name, keys);
            Py_DECREF(keys); /* the cache holds it */
            if (rc < 0) return NULL;
        }
        if (!PyList_Check(keys)) {
            PyErr_SetString(PyExc_TypeError, "key cache entries must be lists");
            return NULL;
        }
        /* our own reference: a cache cleared meanwhile (another topic past the bound) must not
         * free the list under us */
        Py_INCREF(keys);
        tp->keys = keys;
    }
    Py_ssize_t n = PyList_GET_SIZE(keys);
    if (index < n) {
        PyObject *key = PyList_GET_ITEM(keys, index);
        if (key != Py_None) {
            Py_INCREF(key);
            return key;
        }
    }
    while (n <= index) {
        if (PyList_Append(keys, Py_None) < 0) return NULL;
        n++;
    }
    PyObject *key = new_key(tp, index);
    if (!key) return NULL;
    Py_INCREF(key);
    PyList_SetItem(keys, index, key); /* steals one reference (the None it replaces is released) */
    return key;
}

/* The topic names of the last requests, by their position in the request: a consumer commits
 * the same topics in the same order every time, so the name's str (and its cached hash, which
 * the topic table and the key cache look it up by) is reused instead of decoded and hashed
 * anew (25 topics a commit in the bench). Only ASCII names, compared byte for byte: a str
 * whose bytes are those of the request is the str the decoder would make. */
#define NAME_CACHE 64
static PyObject *name_cache[NAME_CACHE];

static PyObject *topic_name(const unsigned char *buf, Py_ssize_t start, Py_ssize_t len, Py_ssize_t t) {
    if (t < NAME_CACHE && len >= 0) {
        PyObject *cached = name_cache[t];
        if (cached && PyUnicode_GET_LENGTH(cached) == len && memcmp(PyUnicode_DATA(cached), buf + start, len) == 0) {
            Py_INCREF(cached);
            return cached;
        }
    }
    PyObject *name = mkstr(buf, start, len);
    if (name && t < NAME_CACHE && PyUnicode_IS_COMPACT_ASCII(name)) {
        Py_INCREF(name);
        Py_XSETREF(name_cache[t], name);
    }
    return name;
}

/* The value tuple type's instance: type(*fields), without the namedtuple's __new__ call. */
static PyObject *new_value(PyTypeObject *type, PyObject *items[5]) {
    PyObject *v = type->tp_alloc(type, 5);
    if (!v) {
        for (int i = 0; i < 5; i++) Py_DECREF(items[i]);
        return NULL;
    }
    for (int i = 0; i < 5; i++) PyTuple_SET_ITEM(v, i, items[i]);
    /* Ints and strings only: no cycle can go through it, so the cyclic GC need not track it (CPython
     * untracks such tuples itself, at their first collection). A commit's hundred values would
     * otherwise make every young collection walk the commits in flight. */
    if (PyObject_GC_IsTracked(v)) PyObject_GC_UnTrack(v);
    return v;
}

static PyObject *s_partitions; /* interned "partitions", made at import */

static PyObject *build_commit(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t topics_pos, ntopics;
    int version;
    PyObject *topic_partitions, *validate, *group;
    long long max_metadata, now;
    PyObject *value_type_obj;
    PyObject *key_cache;
    if (!PyArg_ParseTuple(args, "y*nniOOULLOO!", &view, &topics_pos, &ntopics, &version, &topic_partitions, &validate,
                          &group, &max_metadata, &now, &value_type_obj, &PyDict_Type, &key_cache))
        return NULL;
    PyObject *result = NULL;
    Topic *topics = NULL;
    Part *parts = NULL;
    Py_ssize_t parts_cap = 0;
    Buf resp = {0}, okpos = {0}, batch = {0};
    PyObject *entries = NULL, *empty = NULL, *minus_one = NULL;
    int flexible = version >= 8;
    if (!PyType_Check(value_type_obj) || !PyType_IsSubtype((PyTypeObject *)value_type_obj, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "value_type must be a tuple type");
        goto done;
    }
    PyTypeObject *value_type = (PyTypeObject *)value_type_obj;
    Py_ssize_t glen;
    const char *gutf8 = PyUnicode_AsUTF8AndSize(group, &glen);
    if (!gutf8) goto done;
    if (ntopics < 0 || topics_pos < 0 || topics_pos > view.len || version < 0 || version > 9) {
        PyErr_SetString(PyExc_ValueError, "bad topics position");
        goto done;
    }
    /* Keys and values are written with 2-byte string lengths: longer strings are the Python
     * path's (the codec decides). */
    int fallback = glen > STR16_MAX;
    topics = PyMem_Calloc(ntopics ? ntopics : 1, sizeof(Topic));
    if (!topics) {
        PyErr_NoMemory();
        goto done;
    }
    /* Pass 1: names and partition counts, and whether any partition is known (the group is
     * validated only then: KafkaApis answers a commit of unknown partitions alone). */
    Reader r = {(const unsigned char *)view.buf, topics_pos, view.len, 1};
    int any_known = topic_partitions == Py_None;
    /* Upper bounds of the response and batch sizes, for one allocation each (grow's slow path). */
    Py_ssize_t resp_bound = 16, batch_bound = BATCH_HEADER, nparts_total = 0;
    for (Py_ssize_t t = 0; t < ntopics; t++) {
        Topic *tp = &topics[t];
        rdstr(&r, flexible, 0, &tp->name_start, &tp->name_len);
        tp->nparts = rdarraylen(&r, flexible);
        if (!r.ok || tp->nparts < 0) {
            PyErr_SetString(PyExc_ValueError, "malformed OffsetCommit topics");
            goto done;
        }
        if (tp->name_len > STR16_MAX) fallback = 1;
        tp->name = topic_name(r.buf, tp->name_start, tp->name_len, t);
        if (!tp->name) goto done;
        if (topic_partitions != Py_None) {
            PyObject *c;
            if (PyDict_CheckExact(topic_partitions)) {
                /* The registry's own table (name -> topic with a `partitions` int): what its
                 * partition_count returns, without a Python call per topic. */
                PyObject *topic = PyDict_GetItemWithError(topic_partitions, tp->name); /* borrowed */
                if (topic) {
                    c = PyObject_GetAttr(topic, s_partitions);
                } else if (PyErr_Occurred()) {
                    goto done;
                } else {
                    c = Py_None;
                    Py_INCREF(c);
                }
            } else {
                c = PyObject_CallOneArg(topic_partitions, tp->name);
            }
            if (!c) goto done;
            int truth = PyObject_IsTrue(c);
            if (truth < 0) {
                Py_DECREF(c);
                goto done;
            }
            long long n = -1;
            if (truth) {
                n = PyLong_AsLongLong(c);
                if (n == -1 && PyErr_Occurred()) {
                    Py_DECREF(c);
                    goto done;
                }
            }
            Py_DECREF(c);
            tp->has_count = 1;
            tp->count = n;
        }
        resp_bound += 5 + tp->name_len + 5 + 1;
        /* the partitions as read here, for pass 2 (read once: they were ~10% of its work) */
        if (nparts_total + tp->nparts > parts_cap) {
            /* a count read from the request is only a claim: grown by what was read so far */
            Py_ssize_t cap = parts_cap ? parts_cap : 128;
            while (cap < nparts_total + tp->nparts) {
                if (cap > PY_SSIZE_T_MAX / 2 / (Py_ssize_t)sizeof(Part)) {
                    PyErr_SetString(PyExc_ValueError, "malformed OffsetCommit topics");
                    goto done;
                }
                cap *= 2;
            }
            /* no more than the bytes left could hold (each partition takes >= 14 of them) */
            Py_ssize_t most = nparts_total + (view.len - r.pos) / 14 + 1;
            if (cap > most) cap = most;
            Part *grown = PyMem_Realloc(parts, cap * sizeof(Part));
            if (!grown) {
                PyErr_NoMemory();
                goto done;
            }
            parts = grown;
            parts_cap = cap;
        }
        tp->parts_pos = nparts_total; /* from here on: where its partitions start in parts */
        for (Py_ssize_t i = 0; i < tp->nparts; i++) {
            if (nparts_total >= parts_cap) {
                PyErr_SetString(PyExc_ValueError, "malformed OffsetCommit topics");
                goto done;
            }
            Part p;
            rdpart(&r, version, flexible, &p);
            if (!r.ok) {
                PyErr_SetString(PyExc_ValueError, "malformed OffsetCommit topics");
                goto done;
            }
            parts[nparts_total] = p;
            if (p.meta_len > STR16_MAX) fallback = 1;
            if (tp->has_count && p.index >= 0 && p.index < tp->count) any_known = 1;
            resp_bound += 4 + 2 + 1;
            /* record: 4 varints of at most 5 bytes, attributes, key, value, headers count */
            batch_bound += 20 + 2 + (2 + 2 + glen + 2 + tp->name_len + 4) + (2 + 8 + 4 + 2 + (p.meta_len > 0 ? p.meta_len : 0) + 8) + 1;
            nparts_total++;
        }
        rdnotags(&r, flexible);
        if (!r.ok) {
            PyErr_SetString(PyExc_ValueError, "malformed OffsetCommit topics");
            goto done;
        }
    }
    if (fallback) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    long code = 0;
    if (any_known) {
        PyObject *c = PyObject_CallNoArgs(validate);
        if (!c) goto done;
        code = PyLong_AsLong(c);
        Py_DECREF(c);
        if (code == -1 && PyErr_Occurred()) goto done;
    }

    /* Pass 2: the response, the records and the entries to fold. */
    /* sized for every partition at once: grown from empty, a 100-partition commit's dict was
     * resized five times */
    entries = _PyDict_NewPresized(nparts_total < 65536 ? nparts_total : 65536);
    empty = PyUnicode_FromStringAndSize("", 0);
    minus_one = PyLong_FromLong(-1);
    if (!entries || !empty || !minus_one) goto done;
    /* at most 1 MiB ahead: a bound is no promise the records get written (unknown partitions) */
    if (!grow(&resp, resp_bound < (1 << 20) ? resp_bound : (1 << 20)) ||
        !grow(&batch, batch_bound < (1 << 20) ? batch_bound : (1 << 20)))
        goto done;
    if (version >= 3 && !put32(&resp, 0)) goto done; /* throttle_time_ms */
    if (!(flexible ? putuvarint(&resp, (uint64_t)ntopics + 1) : put32(&resp, (int32_t)ntopics))) goto done;
    if (!grow(&batch, BATCH_HEADER)) goto done;
    memset(batch.data, 0, BATCH_HEADER);
    batch.len = BATCH_HEADER;
    int32_t nrecords = 0;
    const unsigned char *buf = (const unsigned char *)view.buf;
    PyObject *now_obj = PyLong_FromLongLong(now);
    if (!now_obj) goto done;
    for (Py_ssize_t t = 0; t < ntopics; t++) {
        Topic *tp = &topics[t];
        if (flexible ? !putuvarint(&resp, (uint64_t)tp->name_len + 1) : !put16(&resp, (int16_t)tp->name_len)) goto fail;
        if (!put(&resp, buf + tp->name_start, tp->name_len)) goto fail;
        if (!(flexible ? putuvarint(&resp, (uint64_t)tp->nparts + 1) : put32(&resp, (int32_t)tp->nparts))) goto fail;
        for (Py_ssize_t i = 0; i < tp->nparts; i++) {
            const Part *pp = &parts[tp->parts_pos + i];
            int16_t err = 0;
            if (tp->has_count && !(pp->index >= 0 && pp->index < tp->count))
                err = UNKNOWN_TOPIC_OR_PARTITION;
            else if (code)
                err = (int16_t)code;
            else if (pp->meta_len >= 0 && pp->meta_cps > max_metadata)
                err = OFFSET_METADATA_TOO_LARGE;
            /* the response entry: index, error code, (flexible) no tagged fields */
            if (!grow(&resp, 7) || !grow(&okpos, 4)) goto fail;
            unsigned char *o = w32(resp.data + resp.len, pp->index);
            if (!err) {
                uint32_t at = (uint32_t)(o - resp.data);
                memcpy(okpos.data + okpos.len, &at, 4);
                okpos.len += 4;
            }
            o = w16(o, err);
            if (flexible) *o++ = 0;
            resp.len = o - resp.data;
            if (err) continue;
            int32_t epoch = pp->leader_epoch >= 0 ? pp->leader_epoch : -1;
            int64_t ts = pp->commit_timestamp == -1 ? now : pp->commit_timestamp;
            Py_ssize_t mlen = pp->meta_len > 0 ? pp->meta_len : 0;
            /* the record: key v1 (group, topic, partition), value v3 */
            Py_ssize_t klen = 2 + 2 + glen + 2 + tp->name_len + 4;
            Py_ssize_t vlen = 2 + 8 + 4 + 2 + mlen + 8;
            /* record body: attributes, timestamp delta 0, offset delta, key, value, no headers */
            Py_ssize_t bodylen = 2 + zzsize(nrecords) + zzsize(klen) + klen + zzsize(vlen) + vlen + 1;
            if (!grow(&batch, zzsize(bodylen) + bodylen)) goto fail;
            o = batch.data + batch.len;
            o = wzigzag(o, bodylen);
            *o++ = 0; /* attributes */
            *o++ = 0; /* timestamp delta */
            o = wzigzag(o, nrecords);
            o = wzigzag(o, klen);
            o = w16(o, 1);
            o = w16(o, (int16_t)glen);
            memcpy(o, gutf8, glen);
            o += glen;
            o = w16(o, (int16_t)tp->name_len);
            memcpy(o, buf + tp->name_start, tp->name_len);
            o += tp->name_len;
            o = w32(o, pp->index);
            o = wzigzag(o, vlen);
            o = w16(o, 3);
            o = w64(o, pp->offset);
            o = w32(o, epoch);
            o = w16(o, (int16_t)mlen);
            if (mlen) memcpy(o, buf + pp->meta_start, mlen);
            o += mlen;
            o = w64(o, ts);
            *o++ = 0; /* headers */
            batch.len = o - batch.data;
            nrecords++;
            /* the entry: ((topic, partition), OffsetCommitValue(offset, epoch, metadata, ts, -1)) */
            PyObject *items[5];
            items[0] = PyLong_FromLongLong(pp->offset);
            items[1] = PyLong_FromLong(epoch);
            items[2] = mlen ? mkstr(buf, pp->meta_start, mlen) : (Py_INCREF(empty), empty);
            items[3] = ts == now ? (Py_INCREF(now_obj), now_obj) : PyLong_FromLongLong(ts);
            items[4] = (Py_INCREF(minus_one), minus_one);
            if (!items[0] || !items[1] || !items[2] || !items[3]) {
                for (int k = 0; k < 5; k++) Py_XDECREF(items[k]);
                goto fail;
            }
            PyObject *value = new_value(value_type, items);
            if (!value) goto fail;
            PyObject *key = cached_key(key_cache, tp, pp->index);
            if (!key) {
                Py_DECREF(value);
                goto fail;
            }
            int rc = PyDict_SetItem(entries, key, value);
            Py_DECREF(key);
            Py_DECREF(value);
            if (rc < 0) goto fail;
        }
        if (flexible && !put(&resp, "", 1)) goto fail;
    }
    if (flexible && !put(&resp, "", 1)) goto fail;
    Py_DECREF(now_obj);
    now_obj = NULL;

    PyObject *batch_obj;
    if (nrecords) {
        /* the batch header (storage/records.py HEADER), base offset 0 and leader epoch -1: the
         * log stamps both when it appends */
        Buf h = {batch.data, 0, BATCH_HEADER};
        put64(&h, 0);
        put32(&h, (int32_t)(batch.len - 12));
        put32(&h, -1);
        unsigned char magic = 2;
        put(&h, &magic, 1);
        put32(&h, 0); /* crc, below */
        put16(&h, 0);
        put32(&h, nrecords - 1);
        put64(&h, now);
        put64(&h, now);
        put64(&h, -1);
        put16(&h, -1);
        put32(&h, -1);
        put32(&h, nrecords);
        uint32_t crc = crc32c(batch.data + 21, batch.len - 21);
        batch.data[17] = (unsigned char)(crc >> 24);
        batch.data[18] = (unsigned char)(crc >> 16);
        batch.data[19] = (unsigned char)(crc >> 8);
        batch.data[20] = (unsigned char)crc;
        batch_obj = PyBytes_FromStringAndSize((const char *)batch.data, batch.len);
    } else {
        batch_obj = Py_None;
        Py_INCREF(batch_obj);
    }
    PyObject *resp_obj = PyBytes_FromStringAndSize((const char *)resp.data, resp.len);
    PyObject *ok_obj = PyBytes_FromStringAndSize((const char *)okpos.data, okpos.len);
    PyObject *code_obj = PyLong_FromLong(code);
    if (code_obj && batch_obj && resp_obj && ok_obj) result = PyTuple_Pack(5, code_obj, resp_obj, ok_obj, batch_obj, entries);
    Py_XDECREF(code_obj);
    Py_XDECREF(batch_obj);
    Py_XDECREF(resp_obj);
    Py_XDECREF(ok_obj);
    goto done;
fail:
    Py_XDECREF(now_obj);
done:
    if (topics) {
        for (Py_ssize_t t = 0; t < ntopics; t++) {
            Py_XDECREF(topics[t].name);
            Py_XDECREF(topics[t].keys);
        }
        PyMem_Free(topics);
    }
    PyMem_Free(parts);
    PyMem_Free(resp.data);
    PyMem_Free(okpos.data);
    PyMem_Free(batch.data);
    Py_XDECREF(entries);
    Py_XDECREF(empty);
    Py_XDECREF(minus_one);
    PyBuffer_Release(&view);
    return result;
}

/* ---- a steady ConsumerGroupHeartbeat (coordinator/consumer_wire.py) ------------------------ */

static PyObject *s_group_id, *s_member_id, *s_member_epoch;

/* steady_consumer_heartbeat(frame, pos, tail, template, cls) -> (body, end) or None: what
 * consumer_wire's steady reader reads (group id and member id as compact strings of 1-126 bytes,
 * the epoch, then ``tail``, the bytes of every other field unset), the body made as
 * ``cls(template)`` with the two ids and the epoch set; None wherever that reader hands the bytes
 * to the generic decoder (which then decides). */
static PyObject *steady_consumer_heartbeat(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "steady_consumer_heartbeat takes 5 arguments");
        return NULL;
    }
    PyObject *frame = args[0], *tail = args[2];
    if (!PyBytes_CheckExact(frame) || !PyBytes_CheckExact(tail)) Py_RETURN_NONE;
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred()) return NULL;
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(frame);
    Py_ssize_t len = PyBytes_GET_SIZE(frame), n_tail = PyBytes_GET_SIZE(tail);
    if (pos < 0 || pos >= len) Py_RETURN_NONE;
    unsigned g = b[pos];
    if (g < 2 || g >= 0x80) Py_RETURN_NONE;
    Py_ssize_t at_member = pos + g;
    if (at_member >= len) Py_RETURN_NONE;
    unsigned m = b[at_member];
    if (m < 2 || m >= 0x80) Py_RETURN_NONE;
    Py_ssize_t at_epoch = at_member + m;
    Py_ssize_t end = at_epoch + 4 + n_tail;
    if (n_tail < 1 || end > len || memcmp(b + at_epoch + 4, PyBytes_AS_STRING(tail), (size_t)n_tail) != 0)
        Py_RETURN_NONE;
    PyObject *group_id = PyUnicode_DecodeUTF8((const char *)b + pos + 1, (Py_ssize_t)g - 1, NULL);
    PyObject *member_id = group_id ? PyUnicode_DecodeUTF8((const char *)b + at_member + 1, (Py_ssize_t)m - 1, NULL) : NULL;
    if (member_id == NULL) {
        Py_XDECREF(group_id);
        if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear(); /* the generic decoder raises it */
            Py_RETURN_NONE;
        }
        return NULL;
    }
    const unsigned char *e = b + at_epoch;
    int32_t epoch = (int32_t)(((uint32_t)e[0] << 24) | ((uint32_t)e[1] << 16) | ((uint32_t)e[2] << 8) | e[3]);
    PyObject *epoch_obj = PyLong_FromLong(epoch);
    PyObject *body = epoch_obj ? PyObject_CallOneArg(args[4], args[3]) : NULL;
    PyObject *at_end = body ? PyLong_FromSsize_t(end) : NULL;
    PyObject *out = NULL;
    if (at_end != NULL && PyDict_Check(body) && PyDict_SetItem(body, s_group_id, group_id) == 0 &&
        PyDict_SetItem(body, s_member_id, member_id) == 0 && PyDict_SetItem(body, s_member_epoch, epoch_obj) == 0)
        out = PyTuple_Pack(2, body, at_end);
    else if (at_end != NULL && !PyDict_Check(body))
        PyErr_SetString(PyExc_TypeError, "steady_consumer_heartbeat: cls(template) is not a dict");
    Py_DECREF(group_id);
    Py_DECREF(member_id);
    Py_XDECREF(epoch_obj);
    Py_XDECREF(body);
    Py_XDECREF(at_end);
    return out;
}

/* ---- the steady reader with its bodies held per member (issue 26) ------------------------------
 *
 * steady_consumer_reader(state, frame, pos) -> (body, end): the dispatcher's decoder itself (bound
 * to its state with functools.partial: no Python frame per request), state = (tail, template, cls,
 * generic). What steady_consumer_heartbeat answers, and where that answers None, generic(frame,
 * pos) (the generic decoder, which decides as it always did).
 *
 * A member re-sending its epoch with nothing changed sends the same bytes in every heartbeat, so
 * the body read from them is kept, found again by those bytes (ids, epoch, tail: a hash of them,
 * then the epoch and the ids compared with the body's own), and handed out again: no decoding of
 * the ids, no dict, and ids whose hashes are already computed for the coordinator's lookups
 * (~2,700 of a ~41,000-instruction heartbeat, bench/heartbeat_callgrind.py). A body is handed out
 * again only while it is as it was made: its dict version (ma_version_tag, which every change
 * moves) is the one recorded, else it is read anew. The bodies of one group share one group id
 * string. The table holds at most HELD_MAX bodies; once full it is emptied (a group larger than
 * that reads its bodies anew, as before). Only ASCII ids are held (the common case; other bodies
 * are read anew each time). Kafka's KafkaApis decodes every request anew; nothing else differs. */

#if PY_VERSION_HEX < 0x030E0000
#define HOLD_BODIES 1
#else
#define HOLD_BODIES 0 /* no ma_version_tag to tell a mutated body by: read every body anew */
#endif

#define HELD_SLOTS 32768 /* a power of two */
#define HELD_MAX (HELD_SLOTS / 2)

typedef struct {
    uint64_t hash; /* 0: an empty slot */
    PyObject *body;     /* held */
    PyObject *group;    /* the body's group id and member id (held: compared with the bytes) */
    PyObject *member;
    PyObject *template; /* the template and cls it was made from (held: compared by identity) */
    PyObject *cls;
    uint64_t version; /* the body's ma_version_tag when it was made */
    int32_t epoch;
    int32_t n; /* the bytes from the group id's length to the end of the tail */
} Held;

static Held *held;
static Py_ssize_t held_count;
/* The group id of the last body made: the next body of the same group takes the same string (one
 * per group, not one per member: its hash computed once, and it stays in the cache). */
static PyObject *last_group;

static uint64_t held_hash(const unsigned char *p, Py_ssize_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, (size_t)n);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 29;
    return h ? h : 1;
}

static void held_release(Held *e) {
    Py_DECREF(e->body);
    Py_DECREF(e->group);
    Py_DECREF(e->member);
    Py_DECREF(e->template);
    Py_DECREF(e->cls);
    memset(e, 0, sizeof(*e));
}

static void held_clear(void) {
    if (held == NULL) return;
    for (Py_ssize_t i = 0; i < HELD_SLOTS; i++)
        if (held[i].hash) held_release(&held[i]);
    held_count = 0;
    Py_CLEAR(last_group);
}

static PyObject *py_steady_held_clear(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    Py_ssize_t n = held_count;
    held_clear();
    return PyLong_FromSsize_t(n);
}

static inline uint64_t dict_version(PyObject *d) {
#if HOLD_BODIES
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
    return ((PyDictObject *)d)->ma_version_tag;
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
#else
    (void)d;
    return 0;
#endif
}

/* Whether the ASCII string s is the n bytes at p. */
static inline int ascii_is(PyObject *s, const unsigned char *p, Py_ssize_t n) {
    return PyUnicode_IS_COMPACT_ASCII(s) && PyUnicode_GET_LENGTH(s) == n && memcmp(PyUnicode_DATA(s), p, (size_t)n) == 0;
}

static PyObject *steady_consumer_reader(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyTuple_CheckExact(args[0]) || PyTuple_GET_SIZE(args[0]) != 4) {
        PyErr_SetString(PyExc_TypeError, "steady_consumer_reader takes (tail, template, cls, generic), frame, pos");
        return NULL;
    }
    PyObject *state = args[0], *frame = args[1], *tail = PyTuple_GET_ITEM(state, 0);
    PyObject *template = PyTuple_GET_ITEM(state, 1), *cls = PyTuple_GET_ITEM(state, 2);
    PyObject *generic = PyTuple_GET_ITEM(state, 3);
    PyObject *argv[5] = {frame, args[1 + 1], tail, template, cls};
    if (HOLD_BODIES && held != NULL && PyBytes_CheckExact(frame) && PyBytes_CheckExact(tail) && PyLong_CheckExact(args[2])) {
        Py_ssize_t pos = PyLong_AsSsize_t(args[2]);
        if (pos == -1 && PyErr_Occurred()) return NULL;
        const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(frame);
        Py_ssize_t len = PyBytes_GET_SIZE(frame), n_tail = PyBytes_GET_SIZE(tail);
        /* the shape steady_consumer_heartbeat takes, its bytes checked as it checks them */
        if (pos >= 0 && pos < len && b[pos] >= 2 && b[pos] < 0x80 && pos + b[pos] < len) {
            Py_ssize_t g = b[pos], at_member = pos + g;
            Py_ssize_t m = b[at_member], at_epoch = at_member + m;
            Py_ssize_t end = at_epoch + 4 + n_tail;
            if (m >= 2 && m < 0x80 && n_tail >= 1 && end <= len &&
                memcmp(b + at_epoch + 4, PyBytes_AS_STRING(tail), (size_t)n_tail) == 0) {
                const unsigned char *e4 = b + at_epoch;
                int32_t epoch = (int32_t)(((uint32_t)e4[0] << 24) | ((uint32_t)e4[1] << 16) | ((uint32_t)e4[2] << 8) | e4[3]);
                Py_ssize_t n = end - pos;
                uint64_t h = held_hash(b + pos, n);
                Py_ssize_t i = (Py_ssize_t)(h & (HELD_SLOTS - 1));
                for (;;) {
                    Held *e = &held[i];
                    if (e->hash == 0) break;
                    if (e->hash == h && e->n == n && e->template == template && e->cls == cls && e->epoch == epoch &&
                        dict_version(e->body) == e->version && ascii_is(e->member, b + at_member + 1, m - 1) &&
                        ascii_is(e->group, b + pos + 1, g - 1)) {
                        PyObject *at_end = PyLong_FromSsize_t(end);
                        if (at_end == NULL) return NULL;
                        PyObject *got = PyTuple_Pack(2, e->body, at_end);
                        Py_DECREF(at_end);
                        return got;
                    }
                    i = (i + 1) & (HELD_SLOTS - 1);
                }
                PyObject *out = steady_consumer_heartbeat(self, argv, 5);
                if (out == NULL) return NULL;
                if (out == Py_None) {
                    Py_DECREF(out);
                    return PyObject_Vectorcall(generic, args + 1, 2, NULL);
                }
                PyObject *body = PyTuple_GET_ITEM(out, 0);
                PyObject *group = PyDict_GetItemWithError(body, s_group_id);
                PyObject *member = group ? PyDict_GetItemWithError(body, s_member_id) : NULL;
                if (member == NULL || !PyUnicode_IS_COMPACT_ASCII(group) || !PyUnicode_IS_COMPACT_ASCII(member)) {
                    PyErr_Clear();
                    return out; /* not held (an id of other than ASCII): answered all the same */
                }
                if (last_group != NULL && ascii_is(last_group, b + pos + 1, g - 1)) {
                    if (PyDict_SetItem(body, s_group_id, last_group) < 0) {
                        Py_DECREF(out);
                        return NULL;
                    }
                    group = last_group;
                } else {
                    Py_INCREF(group);
                    Py_XSETREF(last_group, group);
                }
                /* the first empty slot of the probe (or, once full, an emptied table's) */
                if (held_count >= HELD_MAX) {
                    held_clear();
                    i = (Py_ssize_t)(h & (HELD_SLOTS - 1));
                }
                Held *e = &held[i];
                e->hash = h;
                e->n = (int32_t)n;
                e->epoch = epoch;
                Py_INCREF(body);
                e->body = body;
                Py_INCREF(group);
                e->group = group;
                Py_INCREF(member);
                e->member = member;
                Py_INCREF(template);
                e->template = template;
                Py_INCREF(cls);
                e->cls = cls;
                e->version = dict_version(body);
                held_count++;
                return out;
            }
        }
    }
    PyObject *out = steady_consumer_heartbeat(self, argv, 5);
    if (out != Py_None) return out;
    Py_DECREF(out);
    return PyObject_Vectorcall(generic, args + 1, 2, NULL);
}

static PyMethodDef methods[] = {
    {"steady_consumer_heartbeat", (PyCFunction)(void (*)(void))steady_consumer_heartbeat, METH_FASTCALL,
     "steady_consumer_heartbeat(frame, pos, tail, template, cls) -> (body, end) or None (the generic decoder's)."},
    {"steady_consumer_reader", (PyCFunction)(void (*)(void))steady_consumer_reader, METH_FASTCALL,
     "steady_consumer_reader((tail, template, cls, generic), frame, pos) -> (body, end): "
     "steady_consumer_heartbeat's body, the same object again for the same bytes while unchanged, "
     "else generic(frame, pos)."},
    {"steady_held_clear", py_steady_held_clear, METH_NOARGS,
     "steady_held_clear() -> how many bodies steady_consumer_reader held (now none)."},
    {"parse_commit", parse_commit, METH_VARARGS,
     "parse_commit(frame, pos, version) -> (end, group_id, generation, member_id, instance_id, retention, "
     "topics_pos, topic_count) or None when the generic decoder must decide."},
    {"build_commit", build_commit, METH_VARARGS,
     "build_commit(frame, topics_pos, topic_count, version, topic_partitions, validate, group_id, max_metadata, "
     "now, value_type, key_cache) -> (code, response body, ok positions, batch or None, {(topic, partition): value}) "
     "or None (the Python path). topic_partitions: None, a callable name -> count or None, or a dict "
     "name -> object with an int `partitions`."},
    {"crc32c", py_crc32c, METH_VARARGS, "crc32c(data) -> the CRC-32C of data (as Kafka's record batches use)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", NULL, -1, methods};

PyMODINIT_FUNC PyInit__native(void) {
    crc_init();
    s_partitions = PyUnicode_InternFromString("partitions");
    s_group_id = PyUnicode_InternFromString("group_id");
    s_member_id = PyUnicode_InternFromString("member_id");
    s_member_epoch = PyUnicode_InternFromString("member_epoch");
    if (!s_partitions || !s_group_id || !s_member_id || !s_member_epoch) return NULL;
    if (HOLD_BODIES) {
        held = PyMem_Calloc(HELD_SLOTS, sizeof(Held));
        if (held == NULL) return PyErr_NoMemory();
    }
#ifdef HAVE_HW_CRC
    __builtin_cpu_init();
    hw_crc = __builtin_cpu_supports("sse4.2") && !getenv("GROUPD_NATIVE_NO_HW_CRC");
#endif
    return PyModule_Create(&module);
}
