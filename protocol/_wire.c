/* groupd.protocol._wire: a request's header read and its Request made in C (issue 26).
 *
 * A steady heartbeat costs the daemon ~6 us, ~80% of it the interpreter running the request path
 * (perf): reading the header's fields one struct call at a time and building the Request in a Python
 * __init__ were ~0.5 us of it. protocol/dispatch.py and protocol/server.py keep the pure-Python path
 * as the reference and the fallback (no compiler, GROUPD_NO_NATIVE=1);
 * tests/protocol/test_wire_native.py checks the two agree and feeds read_header random bytes.
 *
 * read_header(frame, versions) -> (entry, correlation_id, client_id, body_pos) or None
 *     The request header v1/v2 of ``frame`` (bytes): api key and version read as one big-endian
 *     int32, looked up in ``versions`` (dict: that int -> the dispatcher's per-version entry, whose
 *     ``flexible_header`` says whether a tagged-field section follows the client id), the
 *     correlation id, a present client id (UTF-8) and, for a flexible header, an empty tagged-field
 *     section. None for anything else (an unknown version, a null client id, tagged fields, a short
 *     or undecodable header): the Python path reads it and says what is wrong with it.
 *
 * RequestBase: the Request's fields as C members (conn, api_key, api_version, correlation_id,
 *     client_id, body, encode_response, payload, received_ns); protocol/server.py's Request
 *     subclasses it with its methods. new_request(cls, conn, api_key, api_version, correlation_id,
 *     client_id, body, encode_response, received_ns) makes one without the call protocol's argument
 *     parsing (cls must be RequestBase or a subclass).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <structmember.h>

typedef struct {
    PyObject_HEAD
    PyObject *conn;
    PyObject *api_key;
    PyObject *api_version;
    PyObject *correlation_id;
    PyObject *client_id;
    PyObject *body;
    PyObject *encode_response;
    PyObject *payload;
    PyObject *received_ns;
} RequestBase;

static PyObject *str_flexible_header; /* interned "flexible_header" */

static int
req_traverse(RequestBase *self, visitproc visit, void *arg)
{
    Py_VISIT(self->conn);
    Py_VISIT(self->api_key);
    Py_VISIT(self->api_version);
    Py_VISIT(self->correlation_id);
    Py_VISIT(self->client_id);
    Py_VISIT(self->body);
    Py_VISIT(self->encode_response);
    Py_VISIT(self->payload);
    Py_VISIT(self->received_ns);
    return 0;
}

static int
req_clear(RequestBase *self)
{
    Py_CLEAR(self->conn);
    Py_CLEAR(self->api_key);
    Py_CLEAR(self->api_version);
    Py_CLEAR(self->correlation_id);
    Py_CLEAR(self->client_id);
    Py_CLEAR(self->body);
    Py_CLEAR(self->encode_response);
    Py_CLEAR(self->payload);
    Py_CLEAR(self->received_ns);
    return 0;
}

static void
req_dealloc(RequestBase *self)
{
    PyObject_GC_UnTrack(self);
    req_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Sets the fields from 7 or 8 objects (received_ns defaults to 0); steals nothing. */
static void
req_set(RequestBase *self, PyObject *const *a, Py_ssize_t n, PyObject *zero)
{
    PyObject *received = n > 7 ? a[7] : zero;
    Py_INCREF(a[0]); Py_XSETREF(self->conn, a[0]);
    Py_INCREF(a[1]); Py_XSETREF(self->api_key, a[1]);
    Py_INCREF(a[2]); Py_XSETREF(self->api_version, a[2]);
    Py_INCREF(a[3]); Py_XSETREF(self->correlation_id, a[3]);
    Py_INCREF(a[4]); Py_XSETREF(self->client_id, a[4]);
    Py_INCREF(a[5]); Py_XSETREF(self->body, a[5]);
    Py_INCREF(a[6]); Py_XSETREF(self->encode_response, a[6]);
    Py_INCREF(Py_None); Py_XSETREF(self->payload, Py_None);
    Py_INCREF(received); Py_XSETREF(self->received_ns, received);
}

static PyObject *small_zero;

static int
req_init(RequestBase *self, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"conn", "api_key", "api_version", "correlation_id", "client_id", "body",
                            "encode_response", "received_ns", NULL};
    PyObject *a[8] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOOO|O:Request", names, &a[0], &a[1], &a[2], &a[3], &a[4],
                                     &a[5], &a[6], &a[7]))
        return -1;
    req_set(self, a, a[7] != NULL ? 8 : 7, small_zero);
    return 0;
}

static PyMemberDef req_members[] = {
    {"conn", T_OBJECT, offsetof(RequestBase, conn), 0, NULL},
    {"api_key", T_OBJECT, offsetof(RequestBase, api_key), 0, NULL},
    {"api_version", T_OBJECT, offsetof(RequestBase, api_version), 0, NULL},
    {"correlation_id", T_OBJECT, offsetof(RequestBase, correlation_id), 0, NULL},
    {"client_id", T_OBJECT, offsetof(RequestBase, client_id), 0, NULL},
    {"body", T_OBJECT, offsetof(RequestBase, body), 0, NULL},
    {"encode_response", T_OBJECT, offsetof(RequestBase, encode_response), 0, NULL},
    {"payload", T_OBJECT, offsetof(RequestBase, payload), 0, NULL},
    {"received_ns", T_OBJECT, offsetof(RequestBase, received_ns), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject RequestBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "groupd.protocol._wire.RequestBase",
    .tp_basicsize = sizeof(RequestBase),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A request's fields (protocol/server.py's Request subclasses it).",
    .tp_traverse = (traverseproc)req_traverse,
    .tp_clear = (inquiry)req_clear,
    .tp_dealloc = (destructor)req_dealloc,
    .tp_members = req_members,
    .tp_init = (initproc)req_init,
    .tp_new = PyType_GenericNew,
};

static PyObject *
new_request(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "new_request takes 9 arguments");
        return NULL;
    }
    PyObject *cls = args[0];
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &RequestBaseType)) {
        PyErr_SetString(PyExc_TypeError, "new_request: cls must be a RequestBase type");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)cls;
    RequestBase *self = (RequestBase *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    req_set(self, args + 1, 8, small_zero);
    return (PyObject *)self;
}

static inline int32_t
be32(const unsigned char *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}

static PyObject *
read_header(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "read_header takes 2 arguments");
        return NULL;
    }
    PyObject *frame = args[0], *versions = args[1];
    if (!PyBytes_CheckExact(frame) || !PyDict_CheckExact(versions))
        Py_RETURN_NONE;
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(frame);
    Py_ssize_t len = PyBytes_GET_SIZE(frame);
    if (len < 10)
        Py_RETURN_NONE;
    PyObject *key = PyLong_FromLong(be32(b));
    if (key == NULL)
        return NULL;
    PyObject *entry = PyDict_GetItemWithError(versions, key); /* borrowed */
    Py_DECREF(key);
    if (entry == NULL) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    int16_t n = (int16_t)(((uint16_t)b[8] << 8) | (uint16_t)b[9]);
    if (n < 0)
        Py_RETURN_NONE;
    Py_ssize_t pos = 10 + (Py_ssize_t)n;
    if (pos >= len)
        Py_RETURN_NONE;
    Py_INCREF(entry);
    PyObject *flex = PyObject_GetAttr(entry, str_flexible_header);
    if (flex == NULL) {
        Py_DECREF(entry);
        return NULL;
    }
    int flexible = PyObject_IsTrue(flex);
    Py_DECREF(flex);
    if (flexible < 0) {
        Py_DECREF(entry);
        return NULL;
    }
    if (flexible && b[pos] != 0) {
        Py_DECREF(entry);
        Py_RETURN_NONE;
    }
    PyObject *client_id = PyUnicode_DecodeUTF8((const char *)b + 10, n, NULL);
    if (client_id == NULL) {
        /* the Python path raises the same UnicodeDecodeError and closes the connection */
        PyErr_Clear();
        Py_DECREF(entry);
        Py_RETURN_NONE;
    }
    PyObject *corr = PyLong_FromLong(be32(b + 4));
    PyObject *at = PyLong_FromSsize_t(pos + (flexible ? 1 : 0));
    if (corr == NULL || at == NULL) {
        Py_XDECREF(corr);
        Py_XDECREF(at);
        Py_DECREF(client_id);
        Py_DECREF(entry);
        return NULL;
    }
    PyObject *out = PyTuple_New(4);
    if (out == NULL) {
        Py_DECREF(corr);
        Py_DECREF(at);
        Py_DECREF(client_id);
        Py_DECREF(entry);
        return NULL;
    }
    PyTuple_SET_ITEM(out, 0, entry);
    PyTuple_SET_ITEM(out, 1, corr);
    PyTuple_SET_ITEM(out, 2, client_id);
    PyTuple_SET_ITEM(out, 3, at);
    return out;
}

static PyMethodDef methods[] = {
    {"read_header", (PyCFunction)(void (*)(void))read_header, METH_FASTCALL,
     "read_header(frame, versions) -> (entry, correlation_id, client_id, body_pos) or None."},
    {"new_request", (PyCFunction)(void (*)(void))new_request, METH_FASTCALL,
     "new_request(cls, conn, api_key, api_version, correlation_id, client_id, body, encode_response, "
     "received_ns) -> a cls instance."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "groupd.protocol._wire", "A request's header and Request in C (issue 26).", -1, methods,
};

PyMODINIT_FUNC
PyInit__wire(void)
{
    str_flexible_header = PyUnicode_InternFromString("flexible_header");
    small_zero = PyLong_FromLong(0);
    if (str_flexible_header == NULL || small_zero == NULL)
        return NULL;
    if (PyType_Ready(&RequestBaseType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    Py_INCREF(&RequestBaseType);
    if (PyModule_AddObject(m, "RequestBase", (PyObject *)&RequestBaseType) < 0) {
        Py_DECREF(&RequestBaseType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
