/* The append path in C: an optional speed-up (see eventlog/native.py).

   encode_batch() does exactly what canonical.encode_batch_py() does (envelope, canonical JSON
   through the orjson function it is given, SHA-256 chain, stored lines), without the
   interpreter's per-record work; a property test holds the two byte-for-byte equal.
   json_shape() is exact_json.json_shape_py() in one pass (each batch's nesting limit and
   search for nulls), held equal to it by a property test too.
   GroupCommit is group_commit.PyGroupCommit on a thread of its own that never takes the
   interpreter lock. When this module is not built, the pure-Python versions run.

   Safety: encode_batch copies the lists it is given into tuples before running any Python code
   (dumps, or a dict subclass's methods, may change the lists). A GroupCommit's close() may be
   called from several threads (one joins the thread, the others wait for it); a fork while
   one runs leaves the child a GroupCommit whose locks are free, with nothing marked and no
   sync in flight, whose thread starts again on the child's first mark(). A failed sync is
   never lost: room for it is reserved when a file is marked, and collect() clears failures
   only once it has built the list it returns. The module uses multi-phase initialisation. */

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
    PyObject *body_list, *version, *session, *ts, *id_list, *prev, *dumps, *option;
    Py_ssize_t seq;
    if (!PyArg_ParseTuple(args, "O!OUnUO!OOO", &PyList_Type, &body_list, &version, &session,
                          &seq, &ts, &PyList_Type, &id_list, &prev, &dumps, &option))
        return NULL;
    /* Owned copies: dumps, or a body's own methods (a dict subclass), run Python code that
       may empty or refill the caller's lists while this loop holds their items. */
    PyObject *bodies = PyList_AsTuple(body_list);
    if (bodies == NULL)
        return NULL;
    PyObject *ids = PyList_AsTuple(id_list);
    if (ids == NULL) {
        Py_DECREF(bodies);
        return NULL;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(bodies);
    if (PyTuple_GET_SIZE(ids) != count) {
        Py_DECREF(bodies);
        Py_DECREF(ids);
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
        PyObject *body = PyTuple_GET_ITEM(bodies, i);
        if (!PyDict_Check(body)) {
            PyErr_SetString(PyExc_TypeError, "encode_batch needs dict bodies");
            goto fail;
        }
        PyObject *record = envelope(body, version, PyTuple_GET_ITEM(ids, i), session, seq + i + 1,
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
    Py_DECREF(bodies);
    Py_DECREF(ids);
    return result;
fail:
    PyMem_Free(out);
    EVP_MD_CTX_free(ctx);
    Py_XDECREF(count_obj);
    Py_XDECREF(kwnames);
    Py_XDECREF(records);
    Py_XDECREF(hashes);
    Py_DECREF(prev);
    Py_DECREF(bodies);
    Py_DECREF(ids);
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

typedef struct GroupCommit {
    PyObject_HEAD
    pthread_mutex_t mutex;
    pthread_cond_t wake;  /* the thread's interval wait; signalled to stop it */
    pthread_cond_t idle;  /* signalled when a sync ends */
    pthread_mutex_t closing; /* held through close(): one closer joins, the others wait */
    pthread_t thread;
    int initialized, started, stopping, closed;
    struct timespec interval;
    Dirty *dirty;
    size_t n_dirty, cap_dirty;
    int in_flight; /* the fd being synced, or -1: one sync at a time */
    Failure *failures;
    size_t n_failures, cap_failures;
    unsigned long long failure_base; /* how many failures were ever collected: failures[0]'s number */
    Failure spill; /* a failure kept when even the reserved room could not be had */
    int spilled;
    int failed; /* a failure is kept, readable without the mutex */
    struct GroupCommit *prev_live, *next_live; /* every initialized one, for the fork handlers */
} GroupCommit;

/* Every initialized GroupCommit, so a fork can hold all their mutexes (the child then finds
   them free, not held by a thread it does not have). */
static pthread_mutex_t live_mutex = PTHREAD_MUTEX_INITIALIZER;
static GroupCommit *live;
static int fail_allocations; /* test hook: the next n grows fail (see _fail_allocations) */

static int
grow(void **items, size_t *cap, size_t size, size_t need)
{
    if (need <= *cap)
        return 0;
    if (__atomic_load_n(&fail_allocations, __ATOMIC_RELAXED) > 0) {
        __atomic_sub_fetch(&fail_allocations, 1, __ATOMIC_RELAXED);
        return -1;
    }
    size_t grown_cap = *cap ? *cap : 8;
    while (grown_cap < need)
        grown_cap *= 2;
    void *grown = realloc(*items, grown_cap * size);
    if (grown == NULL)
        return -1;
    *items = grown;
    *cap = grown_cap;
    return 0;
}

/* With the mutex held: room for every failure the marked files could still report (each
   dirty fd and the sync in flight), so a sync that fails never needs memory to be kept. */
static int
reserve_failures(GroupCommit *self)
{
    return grow((void **)&self->failures, &self->cap_failures, sizeof(Failure),
                self->n_failures + self->n_dirty + 1);
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

/* With the mutex held: wait until no sync is in flight (syncs run one at a time, so one that
   takes a file's dirty entry has synced it before anyone else looks). */
static void
wait_idle_locked(GroupCommit *self)
{
    while (self->in_flight != -1)
        pthread_cond_wait(&self->idle, &self->mutex);
}

/* With the mutex held: keep a failed sync (in the reserved room; failing that, in the spill
   slot; the flag is set whatever happens, so flush and close raise). */
static void
keep_failure(GroupCommit *self, Failure failure)
{
    if (self->n_failures < self->cap_failures
        || grow((void **)&self->failures, &self->cap_failures, sizeof(Failure),
                self->n_failures + 1) == 0)
        self->failures[self->n_failures++] = failure;
    else if (!self->spilled || failure.first < self->spill.first) {
        self->spill = failure;
        self->spilled = 1;
    }
    __atomic_store_n(&self->failed, 1, __ATOMIC_RELEASE);
}

/* With the mutex held and no sync in flight: fdatasync fd (releasing the mutex meanwhile),
   keeping a failure. */
static void
sync_locked(GroupCommit *self, int fd, long long first)
{
    self->in_flight = fd;
    pthread_mutex_unlock(&self->mutex);
    int failed = fdatasync(fd) != 0, err = errno;
    pthread_mutex_lock(&self->mutex);
    self->in_flight = -1;
    if (failed)
        keep_failure(self, (Failure){fd, err, first});
    pthread_cond_broadcast(&self->idle);
}

/* With the mutex held: sync every fd that was dirty when the round began. */
static void
round_locked(GroupCommit *self)
{
    wait_idle_locked(self);
    size_t n = self->n_dirty;
    if (n == 0)
        return;
    int *fds = malloc(n * sizeof(int));
    if (fds == NULL)
        return; /* the next round, or a flush, tries again */
    for (size_t i = 0; i < n; i++)
        fds[i] = self->dirty[i].fd;
    for (size_t i = 0; i < n; i++) {
        wait_idle_locked(self);
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

/* With the mutex held: start the thread (at init, and in a forked child at its first mark). */
static int
start_locked(GroupCommit *self)
{
    int err = pthread_create(&self->thread, NULL, commit_loop, self);
    if (err == 0)
        self->started = 1;
    return err;
}

/* Stop and join the thread once, whichever threads call this; the others wait for the join. */
static void
stop(GroupCommit *self)
{
    if (!self->initialized)
        return;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->closing);
    pthread_mutex_lock(&self->mutex);
    self->closed = 1;
    int join = self->started;
    self->stopping = 1;
    self->started = 0;
    pthread_cond_signal(&self->wake);
    pthread_mutex_unlock(&self->mutex);
    if (join)
        pthread_join(self->thread, NULL);
    pthread_mutex_unlock(&self->closing);
    Py_END_ALLOW_THREADS
}

static void
init_sync_objects(GroupCommit *self)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&self->mutex, NULL);
    pthread_mutex_init(&self->closing, NULL);
    pthread_cond_init(&self->wake, &attr);
    pthread_cond_init(&self->idle, NULL);
    pthread_condattr_destroy(&attr);
}

/* Fork handlers: the forking thread holds every GroupCommit's mutex across fork(), so none is
   mid-update; the child has no commit thread, so its copies are made free and idle, and the
   thread starts again at the child's first mark(). */
static void
before_fork(void)
{
    pthread_mutex_lock(&live_mutex);
    for (GroupCommit *gc = live; gc != NULL; gc = gc->next_live) {
        pthread_mutex_lock(&gc->closing);
        pthread_mutex_lock(&gc->mutex);
    }
}

static void
after_fork_in_parent(void)
{
    for (GroupCommit *gc = live; gc != NULL; gc = gc->next_live) {
        pthread_mutex_unlock(&gc->mutex);
        pthread_mutex_unlock(&gc->closing);
    }
    pthread_mutex_unlock(&live_mutex);
}

static void
after_fork_in_child(void)
{
    for (GroupCommit *gc = live; gc != NULL; gc = gc->next_live) {
        /* A condition variable may still list the parent's waiters: start it afresh. */
        init_sync_objects(gc);
        gc->started = 0;     /* the thread was the parent's */
        gc->in_flight = -1;  /* a sync in flight was the parent's thread's; the parent ends it */
        gc->n_dirty = 0;     /* the parent's writes: the parent syncs them */
    }
    pthread_mutex_init(&live_mutex, NULL);
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
    init_sync_objects(self);
    pthread_mutex_lock(&live_mutex);
    self->initialized = 1;
    self->next_live = live;
    if (live != NULL)
        live->prev_live = self;
    live = self;
    pthread_mutex_lock(&self->mutex);
    int err = start_locked(self);
    pthread_mutex_unlock(&self->mutex);
    pthread_mutex_unlock(&live_mutex);
    if (err != 0) {
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    return 0;
}

static void
GroupCommit_dealloc(GroupCommit *self)
{
    stop(self);
    if (self->initialized) {
        pthread_mutex_lock(&live_mutex);
        if (self->prev_live != NULL)
            self->prev_live->next_live = self->next_live;
        else
            live = self->next_live;
        if (self->next_live != NULL)
            self->next_live->prev_live = self->prev_live;
        pthread_mutex_unlock(&live_mutex);
        pthread_mutex_destroy(&self->mutex);
        pthread_mutex_destroy(&self->closing);
        pthread_cond_destroy(&self->wake);
        pthread_cond_destroy(&self->idle);
    }
    free(self->dirty);
    free(self->failures);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
check_initialized(GroupCommit *self)
{
    if (self->initialized)
        return 0;
    PyErr_SetString(PyExc_RuntimeError, "GroupCommit.__init__ was not called");
    return -1;
}

static PyObject *
GroupCommit_mark(GroupCommit *self, PyObject *args)
{
    int fd;
    long long first;
    if (!PyArg_ParseTuple(args, "iL", &fd, &first) || check_initialized(self) < 0)
        return NULL;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->mutex);
    if (!self->started && !self->stopping && !self->closed)
        err = start_locked(self); /* a forked child's first mark */
    size_t i = 0;
    while (i < self->n_dirty && self->dirty[i].fd != fd)
        i++;
    if (i < self->n_dirty) {
        if (first < self->dirty[i].first)
            self->dirty[i].first = first;
    }
    else if (grow((void **)&self->dirty, &self->cap_dirty, sizeof(Dirty), i + 1) == 0) {
        self->dirty[self->n_dirty++] = (Dirty){fd, first};
        if (reserve_failures(self) < 0) {
            /* No room to keep its failure later: sync it now, as `always` would. */
            wait_idle_locked(self);
            if (take_dirty(self, fd) >= 0)
                sync_locked(self, fd, first);
        }
    }
    else {
        /* Cannot remember it is dirty: sync it now (the write is already done, so raising
           would report a stored record as not stored). */
        wait_idle_locked(self);
        sync_locked(self, fd, first);
    }
    pthread_mutex_unlock(&self->mutex);
    Py_END_ALLOW_THREADS
    if (err != 0) {
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_RETURN_NONE;
}

static PyObject *
GroupCommit_run_once(GroupCommit *self, PyObject *unused)
{
    if (check_initialized(self) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->mutex);
    round_locked(self);
    wait_idle_locked(self); /* a sync the thread began before this round */
    pthread_mutex_unlock(&self->mutex);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *
GroupCommit_forget(GroupCommit *self, PyObject *args)
{
    int fd;
    if (!PyArg_ParseTuple(args, "i", &fd) || check_initialized(self) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->mutex);
    wait_idle_locked(self); /* fd's sync may be the one in flight */
    long long first = take_dirty(self, fd);
    if (first >= 0)
        sync_locked(self, fd, first);
    pthread_mutex_unlock(&self->mutex);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *
GroupCommit_collect(GroupCommit *self, PyObject *unused)
{
    if (check_initialized(self) < 0)
        return NULL;
    /* Copy the failures out under the mutex (no Python code runs there: a finalizer run by an
       allocation could take the interpreter lock's turn, or call back into this object),
       build the list without it, then drop exactly the failures the list holds. Nothing is
       dropped if any step fails. */
    pthread_mutex_lock(&self->mutex);
    unsigned long long base = self->failure_base;
    size_t n = self->n_failures, all = n + (self->spilled ? 1 : 0);
    Failure spill = self->spill;
    int spilled = self->spilled;
    Failure *taken = NULL;
    int no_memory = 0;
    if (all > 0) {
        if (__atomic_load_n(&fail_allocations, __ATOMIC_RELAXED) > 0) {
            __atomic_sub_fetch(&fail_allocations, 1, __ATOMIC_RELAXED);
            no_memory = 1;
        }
        else if ((taken = malloc(all * sizeof(Failure))) == NULL)
            no_memory = 1;
        else {
            memcpy(taken, self->failures, n * sizeof(Failure));
            if (spilled)
                taken[n] = spill;
        }
    }
    pthread_mutex_unlock(&self->mutex);
    if (no_memory)
        return PyErr_NoMemory();
    PyObject *out = PyList_New((Py_ssize_t)all);
    for (size_t i = 0; out != NULL && i < all; i++) {
        PyObject *item = Py_BuildValue("(iiL)", taken[i].fd, taken[i].err, taken[i].first);
        if (item == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, (Py_ssize_t)i, item);
    }
    free(taken);
    if (out == NULL)
        return NULL;
    pthread_mutex_lock(&self->mutex);
    /* Another collect may have taken some of them meanwhile: drop only what is still there. */
    unsigned long long end = base + n;
    if (end > self->failure_base) {
        size_t k = (size_t)(end - self->failure_base);
        memmove(self->failures, self->failures + k, (self->n_failures - k) * sizeof(Failure));
        self->n_failures -= k;
        self->failure_base = end;
    }
    if (spilled && self->spilled && memcmp(&spill, &self->spill, sizeof spill) == 0)
        self->spilled = 0;
    if (self->n_failures == 0 && !self->spilled)
        __atomic_store_n(&self->failed, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&self->mutex);
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
    {"close", (PyCFunction)GroupCommit_close, METH_NOARGS,
     "Stop the thread (no final sync); safe to call again, from any thread."},
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

static PyObject *
fail_allocations_hook(PyObject *self, PyObject *arg)
{
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    __atomic_store_n(&fail_allocations, (int)n, __ATOMIC_RELAXED);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(json_shape_doc,
"json_shape(data) -> (depth, null)\n\n"
"What eventlog.exact_json.json_shape_py returns for the JSON bytes data: how deep its\n"
"objects and arrays nest (a scalar 0, {} 1), and whether a null is in it outside strings.");

/* One pass: brackets outside strings move the depth, an 'n' outside strings can only begin
   null; a string is skipped to its closing quote (found with memchr, and taken only if an
   even run of backslashes precedes it), so a message's text, most of a batch's bytes, costs
   next to nothing. */
static PyObject *
json_shape(PyObject *self, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *at = view.buf, *end = at + view.len;
    Py_ssize_t depth = 0, deepest = 0;
    int null = 0;
    while (at < end) {
        switch (*at++) {
        case '{':
        case '[':
            if (++depth > deepest)
                deepest = depth;
            break;
        case '}':
        case ']':
            depth--;
            break;
        case 'n':
            null = 1;
            break;
        case '"':
            for (;;) {
                const unsigned char *quote = memchr(at, '"', (size_t)(end - at));
                if (quote == NULL) {
                    at = end;
                    break;
                }
                const unsigned char *run = quote;
                while (run > at && run[-1] == '\\')
                    run--;
                at = quote + 1;
                if (((quote - run) & 1) == 0)
                    break; /* not escaped: the string ends here */
            }
            break;
        }
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(nO)", deepest, null ? Py_True : Py_False);
}

static PyMethodDef methods[] = {
    {"encode_batch", encode_batch, METH_VARARGS, encode_batch_doc},
    {"json_shape", json_shape, METH_O, json_shape_doc},
    {"_fail_allocations", fail_allocations_hook, METH_O,
     "_fail_allocations(n): for tests, the group commit's next n allocations fail."},
    {NULL, NULL, 0, NULL},
};

/* Process-wide state, set up once whichever interpreter imports the module first: the
   interned keys, the digest, the fork handlers. */
static int
init_process_state(void)
{
    static int done;
    if (done)
        return 0;
#define KEY(var, text)                                                                          \
    if ((var = PyUnicode_InternFromString(text)) == NULL)                                       \
        return -1;
    KEY(k_v, "v") KEY(k_id, "id") KEY(k_session, "session") KEY(k_seq, "seq") KEY(k_ts, "ts")
    KEY(k_batch, "batch") KEY(k_prev, "prev") KEY(k_option, "option")
#undef KEY
    sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
    if (sha256 == NULL) {
        PyErr_SetString(PyExc_ImportError, "OpenSSL has no SHA-256");
        return -1;
    }
    int err = pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
    if (err != 0) {
        errno = err;
        PyErr_SetFromErrno(PyExc_ImportError);
        return -1;
    }
    done = 1;
    return 0;
}

static int
exec_module(PyObject *m)
{
    if (init_process_state() < 0 || PyType_Ready(&GroupCommitType) < 0)
        return -1;
    Py_INCREF(&GroupCommitType);
    if (PyModule_AddObject(m, "GroupCommit", (PyObject *)&GroupCommitType) < 0) {
        Py_DECREF(&GroupCommitType);
        return -1;
    }
    return 0;
}

static PyModuleDef_Slot slots[] = {
    {Py_mod_exec, exec_module},
    {0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "eventlog._lines",
    .m_doc = "The append path's inner loop in C.",
    .m_size = 0,
    .m_methods = methods,
    .m_slots = slots,
};

PyMODINIT_FUNC
PyInit__lines(void)
{
    return PyModuleDef_Init(&module);
}
