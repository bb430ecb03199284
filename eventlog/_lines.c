/* The append path in C: an optional speed-up (see eventlog/native.py).

   encode_batch() does exactly what canonical.encode_batch_py() does (envelope, canonical JSON
   through the orjson function it is given, SHA-256 chain, stored lines), without the
   interpreter's per-record work; a property test holds the two byte-for-byte equal.
   GroupCommit is group_commit.PyGroupCommit on a thread of its own that never takes the
   interpreter lock. When this module is not built, the pure-Python versions run. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <openssl/evp.h>
#include <string.h>
#include <unistd.h>

static PyObject *k_v, *k_id, *k_session, *k_seq, *k_ts, *k_batch, *k_prev, *k_option;
static EVP_MD *sha256;

static const char HEX[] = "0123456789abcdef";
static const char HASH_KEY[] = ",\"hash\":\"";
#define HASH_KEY_LEN (sizeof(HASH_KEY) - 1)
#define LINE_END "\"}\n"
#define LINE_END_LEN 3

/* The envelope of record i of the batch (the body's own id and ts win), then ``prev``. */
static PyObject *
envelope(PyObject *body, PyObject *version, PyObject *id, PyObject *session, Py_ssize_t seq,
         PyObject *ts, Py_ssize_t position, PyObject *count, PyObject *prev)
{
    PyObject *record = PyDict_New();
    if (record == NULL)
        return NULL;
    PyObject *seq_obj = PyLong_FromSsize_t(seq);
    if (seq_obj == NULL)
        goto fail;
    int bad = PyDict_SetItem(record, k_v, version) || PyDict_SetItem(record, k_id, id)
        || PyDict_SetItem(record, k_session, session) || PyDict_SetItem(record, k_seq, seq_obj)
        || PyDict_SetItem(record, k_ts, ts);
    Py_DECREF(seq_obj);
    if (bad)
        goto fail;
    if (count != NULL) {
        PyObject *marker = Py_BuildValue("[nO]", position, count);
        if (marker == NULL)
            goto fail;
        bad = PyDict_SetItem(record, k_batch, marker);
        Py_DECREF(marker);
        if (bad)
            goto fail;
    }
    if (PyDict_Update(record, body) || PyDict_SetItem(record, k_prev, prev))
        goto fail;
    return record;
fail:
    Py_DECREF(record);
    return NULL;
}

/* Append canonical[:-1] + ',"hash":"' + hex + '"}\n' to the output buffer. */
static int
add_line(char **out, size_t *len, size_t *cap, const char *canonical, size_t n, const char *hex)
{
    size_t need = *len + n - 1 + HASH_KEY_LEN + 64 + LINE_END_LEN;
    if (need > *cap) {
        size_t grown_cap = *cap;
        while (need > grown_cap)
            grown_cap *= 2;
        char *grown = PyMem_Realloc(*out, grown_cap);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        *out = grown;
        *cap = grown_cap;
    }
    char *at = *out + *len;
    memcpy(at, canonical, n - 1);
    at += n - 1;
    memcpy(at, HASH_KEY, HASH_KEY_LEN);
    at += HASH_KEY_LEN;
    memcpy(at, hex, 64);
    at += 64;
    memcpy(at, LINE_END, LINE_END_LEN);
    *len = need;
    return 0;
}

PyDoc_STRVAR(encode_batch_doc,
"encode_batch(bodies, version, session, seq, ts, ids, prev, dumps, option)\n"
"-> (records, data, hashes)\n\n"
"What eventlog.canonical.encode_batch_py returns for the same arguments.");

static PyObject *
encode_batch(PyObject *self, PyObject *args)
{
    PyObject *bodies, *version, *session, *ts, *ids, *prev, *dumps, *option;
    Py_ssize_t seq;
    if (!PyArg_ParseTuple(args, "O!OUnUO!OOO", &PyList_Type, &bodies, &version, &session, &seq,
                          &ts, &PyList_Type, &ids, &prev, &dumps, &option))
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(bodies);
    if (PyList_GET_SIZE(ids) != count) {
        PyErr_SetString(PyExc_ValueError, "encode_batch needs one id per body");
        return NULL;
    }
    PyObject *records = PyList_New(count), *hashes = PyList_New(count);
    PyObject *count_obj = count > 1 ? PyLong_FromSsize_t(count) : NULL;
    PyObject *kwnames = PyTuple_Pack(1, k_option);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    size_t cap = 512 * (size_t)(count > 0 ? count : 1), len = 0;
    char *out = PyMem_Malloc(cap);
    Py_INCREF(prev);
    if (records == NULL || hashes == NULL || (count > 1 && count_obj == NULL) || kwnames == NULL)
        goto fail;
    if (ctx == NULL || out == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *body = PyList_GET_ITEM(bodies, i);
        if (!PyDict_Check(body)) {
            PyErr_SetString(PyExc_TypeError, "encode_batch needs dict bodies");
            goto fail;
        }
        PyObject *record = envelope(body, version, PyList_GET_ITEM(ids, i), session, seq + i + 1,
                                    ts, i + 1, count_obj, prev);
        if (record == NULL)
            goto fail;
        PyList_SET_ITEM(records, i, record);
        PyObject *argv[2] = {record, option};
        PyObject *canonical = PyObject_Vectorcall(dumps, argv, 1, kwnames);
        if (canonical == NULL)
            goto fail;
        if (!PyBytes_Check(canonical) || PyBytes_GET_SIZE(canonical) < 2) {
            Py_DECREF(canonical);
            PyErr_SetString(PyExc_TypeError, "dumps must return a JSON object as bytes");
            goto fail;
        }
        const char *text = PyBytes_AS_STRING(canonical);
        size_t n = (size_t)PyBytes_GET_SIZE(canonical);
        unsigned char md[32];
        char hex[64];
        int hashed = EVP_DigestInit_ex2(ctx, sha256, NULL) && EVP_DigestUpdate(ctx, text, n)
            && EVP_DigestFinal_ex(ctx, md, NULL);
        if (!hashed) {
            Py_DECREF(canonical);
            PyErr_SetString(PyExc_RuntimeError, "OpenSSL could not compute SHA-256");
            goto fail;
        }
        for (int j = 0; j < 32; j++) {
            hex[2 * j] = HEX[md[j] >> 4];
            hex[2 * j + 1] = HEX[md[j] & 15];
        }
        int added = add_line(&out, &len, &cap, text, n, hex);
        Py_DECREF(canonical);
        if (added < 0)
            goto fail;
        PyObject *digest = PyUnicode_FromStringAndSize(hex, 64);
        if (digest == NULL)
            goto fail;
        PyList_SET_ITEM(hashes, i, digest);
        Py_INCREF(digest);
        Py_SETREF(prev, digest);
    }
    PyObject *data = PyBytes_FromStringAndSize(out, (Py_ssize_t)len);
    PyObject *result = data == NULL ? NULL : PyTuple_Pack(3, records, data, hashes);
    Py_XDECREF(data);
    PyMem_Free(out);
    EVP_MD_CTX_free(ctx);
    Py_XDECREF(count_obj);
    Py_DECREF(kwnames);
    Py_DECREF(records);
    Py_DECREF(hashes);
    Py_DECREF(prev);
    return result;
fail:
    PyMem_Free(out);
    EVP_MD_CTX_free(ctx);
    Py_XDECREF(count_obj);
    Py_XDECREF(kwnames);
    Py_XDECREF(records);
    Py_XDECREF(hashes);
    Py_DECREF(prev);
    return NULL;
}

/* ------------------------------------------------------------------ group commit */

typedef struct {
    int fd;
    long long first; /* the first seq written since the fd's last sync began */
} Dirty;

typedef struct {
    int fd;
    int err;
    long long first;
} Failure;

typedef struct {
    PyObject_HEAD
    pthread_mutex_t mutex;
    pthread_cond_t wake;  /* the thread's interval wait; signalled to stop it */
    pthread_cond_t idle;  /* signalled when a sync ends */
    pthread_t thread;
    int initialized, started, stopping;
    struct timespec interval;
    Dirty *dirty;
    size_t n_dirty, cap_dirty;
    int in_flight; /* the fd being synced, or -1 */
    Failure *failures;
    size_t n_failures, cap_failures;
    int failed; /* n_failures > 0, readable without the mutex */
} GroupCommit;

static int
grow(void **items, size_t *cap, size_t size, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t grown_cap = *cap ? *cap * 2 : 8;
    void *grown = realloc(*items, grown_cap * size);
    if (grown == NULL)
        return -1;
    *items = grown;
    *cap = grown_cap;
    return 0;
}

/* With the mutex held: take fd out of the dirty list; its first seq, or -1 if absent. */
static long long
take_dirty(GroupCommit *self, int fd)
{
    for (size_t i = 0; i < self->n_dirty; i++) {
        if (self->dirty[i].fd == fd) {
            long long first = self->dirty[i].first;
            self->dirty[i] = self->dirty[--self->n_dirty];
            return first;
        }
    }
    return -1;
}

/* With the mutex held: fdatasync fd (releasing the mutex meanwhile), keeping a failure. */
static void
sync_locked(GroupCommit *self, int fd, long long first)
{
    self->in_flight = fd;
    pthread_mutex_unlock(&self->mutex);
    int failed = fdatasync(fd) != 0, err = errno;
    pthread_mutex_lock(&self->mutex);
    self->in_flight = -1;
    if (failed && grow((void **)&self->failures, &self->cap_failures, sizeof(Failure),
                       self->n_failures + 1) == 0) {
        self->failures[self->n_failures++] = (Failure){fd, err, first};
        __atomic_store_n(&self->failed, 1, __ATOMIC_RELEASE);
    }
    pthread_cond_broadcast(&self->idle);
}

/* With the mutex held: sync every fd that was dirty when the round began. */
static void
round_locked(GroupCommit *self)
{
    size_t n = self->n_dirty;
    if (n == 0)
        return;
    int *fds = malloc(n * sizeof(int));
    if (fds == NULL)
        return; /* the next round, or a flush, tries again */
    for (size_t i = 0; i < n; i++)
        fds[i] = self->dirty[i].fd;
    for (size_t i = 0; i < n; i++) {
        long long first = take_dirty(self, fds[i]); /* gone if forgotten meanwhile */
        if (first >= 0)
            sync_locked(self, fds[i], first);
    }
    free(fds);
}

static void
deadline(struct timespec *at, const struct timespec *after)
{
    clock_gettime(CLOCK_MONOTONIC, at);
    at->tv_sec += after->tv_sec;
    at->tv_nsec += after->tv_nsec;
    if (at->tv_nsec >= 1000000000L) {
        at->tv_sec += 1;
        at->tv_nsec -= 1000000000L;
    }
}

static void *
commit_loop(void *arg)
{
    GroupCommit *self = arg;
    pthread_mutex_lock(&self->mutex);
    while (!self->stopping) {
        struct timespec at;
        deadline(&at, &self->interval);
        while (!self->stopping && pthread_cond_timedwait(&self->wake, &self->mutex, &at) == 0)
            ; /* woken early but not stopping: wait out the interval */
        if (!self->stopping)
            round_locked(self);
    }
    pthread_mutex_unlock(&self->mutex);
    return NULL;
}

static void
stop(GroupCommit *self)
{
    if (!self->started)
        return;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->mutex);
    self->stopping = 1;
    pthread_cond_signal(&self->wake);
    pthread_mutex_unlock(&self->mutex);
    pthread_join(self->thread, NULL);
    Py_END_ALLOW_THREADS
    self->started = 0;
}

static int
GroupCommit_init(GroupCommit *self, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"interval", NULL};
    double interval;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "d:GroupCommit", names, &interval))
        return -1;
    if (self->initialized) {
        PyErr_SetString(PyExc_RuntimeError, "GroupCommit is already initialized");
        return -1;
    }
    if (!(interval > 0) || interval > 86400.0 * 365) {
        PyErr_SetString(PyExc_ValueError, "interval must be a positive number of seconds");
        return -1;
    }
    self->interval.tv_sec = (time_t)interval;
    self->interval.tv_nsec = (long)((interval - (double)self->interval.tv_sec) * 1e9);
    self->in_flight = -1;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&self->mutex, NULL);
    pthread_cond_init(&self->wake, &attr);
    pthread_cond_init(&self->idle, NULL);
    pthread_condattr_destroy(&attr);
    self->initialized = 1;
    int err = pthread_create(&self->thread, NULL, commit_loop, self);
    if (err != 0) {
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    self->started = 1;
    return 0;
}

static void
GroupCommit_dealloc(GroupCommit *self)
{
    stop(self);
    if (self->initialized) {
        pthread_mutex_destroy(&self->mutex);
        pthread_cond_destroy(&self->wake);
        pthread_cond_destroy(&self->idle);
    }
    free(self->dirty);
    free(self->failures);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
GroupCommit_mark(GroupCommit *self, PyObject *args)
{
    int fd;
    long long first;
    if (!PyArg_ParseTuple(args, "iL", &fd, &first))
        return NULL;
    int ok = 1;
    pthread_mutex_lock(&self->mutex);
    size_t i = 0;
    while (i < self->n_dirty && self->dirty[i].fd != fd)
        i++;
    if (i < self->n_dirty) {
        if (first < self->dirty[i].first)
            self->dirty[i].first = first;
    }
    else if (grow((void **)&self->dirty, &self->cap_dirty, sizeof(Dirty), i + 1) == 0)
        self->dirty[self->n_dirty++] = (Dirty){fd, first};
    else
        ok = 0;
    pthread_mutex_unlock(&self->mutex);
    if (!ok)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static PyObject *
GroupCommit_run_once(GroupCommit *self, PyObject *unused)
{
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->mutex);
    round_locked(self);
    while (self->in_flight != -1) /* a sync the thread began before this round */
        pthread_cond_wait(&self->idle, &self->mutex);
    pthread_mutex_unlock(&self->mutex);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *
GroupCommit_forget(GroupCommit *self, PyObject *args)
{
    int fd;
    if (!PyArg_ParseTuple(args, "i", &fd))
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->mutex);
    long long first = take_dirty(self, fd);
    while (self->in_flight == fd)
        pthread_cond_wait(&self->idle, &self->mutex);
    if (first >= 0)
        sync_locked(self, fd, first);
    pthread_mutex_unlock(&self->mutex);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *
GroupCommit_collect(GroupCommit *self, PyObject *unused)
{
    pthread_mutex_lock(&self->mutex);
    Failure *taken = self->failures;
    size_t n = self->n_failures;
    self->failures = NULL;
    self->n_failures = self->cap_failures = 0;
    __atomic_store_n(&self->failed, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&self->mutex);
    PyObject *out = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; out != NULL && i < n; i++) {
        PyObject *item = Py_BuildValue("(iiL)", taken[i].fd, taken[i].err, taken[i].first);
        if (item == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, (Py_ssize_t)i, item);
    }
    free(taken);
    return out;
}

static PyObject *
GroupCommit_close(GroupCommit *self, PyObject *unused)
{
    stop(self);
    Py_RETURN_NONE;
}

static PyObject *
GroupCommit_get_failed(GroupCommit *self, void *closure)
{
    return PyBool_FromLong(__atomic_load_n(&self->failed, __ATOMIC_ACQUIRE));
}

static PyMethodDef GroupCommit_methods[] = {
    {"mark", (PyCFunction)GroupCommit_mark, METH_VARARGS,
     "mark(fd, first): fd has writes not yet synced, from seq first on."},
    {"run_once", (PyCFunction)GroupCommit_run_once, METH_NOARGS,
     "Sync every marked fd now, in this thread, and wait for a sync already under way."},
    {"forget", (PyCFunction)GroupCommit_forget, METH_VARARGS,
     "forget(fd): sync fd if it is marked, then drop it (before it is closed)."},
    {"collect", (PyCFunction)GroupCommit_collect, METH_NOARGS,
     "The failed syncs since the last call: a list of (fd, errno, first)."},
    {"close", (PyCFunction)GroupCommit_close, METH_NOARGS, "Stop the thread (no final sync)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef GroupCommit_getset[] = {
    {"failed", (getter)GroupCommit_get_failed, NULL, "A sync failed since the last collect().",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject GroupCommitType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "eventlog._lines.GroupCommit",
    .tp_doc = PyDoc_STR("GroupCommit(interval): fdatasync the marked fds every interval "
                        "seconds, on a thread that never takes the interpreter lock."),
    .tp_basicsize = sizeof(GroupCommit),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)GroupCommit_init,
    .tp_dealloc = (destructor)GroupCommit_dealloc,
    .tp_methods = GroupCommit_methods,
    .tp_getset = GroupCommit_getset,
};

static PyMethodDef methods[] = {
    {"encode_batch", encode_batch, METH_VARARGS, encode_batch_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "eventlog._lines", "The append path's inner loop in C.", -1, methods,
};

PyMODINIT_FUNC
PyInit__lines(void)
{
#define KEY(var, text)                                                                          \
    if ((var = PyUnicode_InternFromString(text)) == NULL)                                       \
        return NULL;
    KEY(k_v, "v") KEY(k_id, "id") KEY(k_session, "session") KEY(k_seq, "seq") KEY(k_ts, "ts")
    KEY(k_batch, "batch") KEY(k_prev, "prev") KEY(k_option, "option")
#undef KEY
    sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
    if (sha256 == NULL) {
        PyErr_SetString(PyExc_ImportError, "OpenSSL has no SHA-256");
        return NULL;
    }
    if (PyType_Ready(&GroupCommitType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&GroupCommitType);
    if (PyModule_AddObject(m, "GroupCommit", (PyObject *)&GroupCommitType) < 0) {
        Py_DECREF(&GroupCommitType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
