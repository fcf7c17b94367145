/* pyframes.c — Python stacks as allocation sites (see pyframes.h).
 *
 * Capture, on the allocating thread:
 *   1. the thread must already have a Python thread state (PyGILState_GetThisThreadState;
 *      never create one) and the interpreter must not be finalizing;
 *   2. PyGILState_Ensure: PyTorch's bindings release the GIL around every operator, so
 *      the thread usually does not hold it; it gets it back with its own thread state,
 *      whose current frame is the Python line that called the operator (PyTorch's
 *      CapturedTraceback does the same when it records memory history);
 *   3. walk PyThreadState_GetFrame / PyFrame_GetBack, each frame interned by (code object,
 *      line) into a table of texts; PyGILState_Release.
 * The table is insert-only and open-addressed: lookups read published entries without a
 * lock (reports read them from any thread); inserts take a mutex. A code object whose
 * frame was interned is kept alive (one reference), so its address names it for the
 * rest of the process. 65,536 distinct (function, line) pairs at most; past that, frames
 * read "?". nn.Module's call machinery is left out of the stacks (is_plumbing). From 3.11
 * a second table maps a frame's instruction to its line's id, so the line table is read
 * once per instruction, not once per capture.
 *
 * Cost: about 0.25 us for a stack 11 frames deep (bench/python_frames.py), plus waiting
 * for the GIL when another thread holds it; off by default, the PyTorch package turns it
 * on in guard mode.
 */
#define _GNU_SOURCE
#include "pyframes.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/driver.h"
#include "base/common.h"
#include "base/options.h"
#include "sites.h"

/* The interpreter's C API, as the stable ABI declares it (objects are opaque here). */
static struct {
    int (*IsInitialized)(void);
    int (*IsFinalizing)(void);
    void *(*GILState_GetThisThreadState)(void);
    int (*GILState_Ensure)(void);
    void (*GILState_Release)(int);
    void *(*ThreadState_GetFrame)(void *);
    void *(*Frame_GetBack)(void *);
    void *(*Frame_GetCode)(void *);
    int (*Frame_GetLineNumber)(void *);
    void *(*Object_GetAttrString)(void *, const char *);
    const char *(*Unicode_AsUTF8)(void *);
    void (*IncRef)(void *);
    void (*DecRef)(void *);
    void (*Err_Fetch)(void **, void **, void **);
    void (*Err_Restore)(void *, void *, void *);
    /* Optional (3.11): the frame's instruction, whose line is then looked up once. */
    int (*Frame_GetLasti)(void *);
    int (*Code_Addr2Line)(void *, int);
} py;

bool vg__pyframes_on;

#define SLOTS (1u << 16)

/* Both tables below are insert-only and open-addressed over (code object, number) keys,
 * their entries published with release stores; an entry starts with its key. */
typedef struct pykey {
    const void *code;
    int n;
} pykey_t;

typedef struct table {
    _Atomic(pykey_t *) slot[SLOTS];
    unsigned used;
} table_t;

/* (code object, line) -> "function (file:line)"; a frame's id is its slot + 1. The code
 * object is kept alive (one reference), so its address names it for good. */
typedef struct pyframe {
    pykey_t key;   /* code, line */
    bool plumbing; /* left out of stacks: see is_plumbing */
    char text[];   /* "function (file:line)" */
} pyframe_t;

/* (code object, instruction) -> the id of its line: working out a line from the line
 * table is most of a capture's cost, and a loop allocates at the same instructions over
 * and over. Only code objects pinned by the table of lines are entered. */
typedef struct pc_entry {
    pykey_t key; /* code, instruction offset */
    uint32_t id;
} pc_entry_t;

static table_t g_lines, g_pcs;
static pthread_mutex_t g_insert = PTHREAD_MUTEX_INITIALIZER;

static uint32_t slot_of(const void *code, int n) {
    uint64_t h = ((uint64_t)(uintptr_t)code ^ ((uint64_t)(unsigned)n << 40)) *
                 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 48) & (SLOTS - 1);
}

/* The slot holding (code, n), or -1. */
static int table_find(table_t *t, const void *code, int n) {
    uint32_t i = slot_of(code, n);
    for (uint32_t probe = 0; probe < SLOTS; probe++, i = (i + 1) & (SLOTS - 1)) {
        pykey_t *e = atomic_load_explicit(&t->slot[i], memory_order_acquire);
        if (!e)
            return -1;
        if (e->code == code && e->n == n)
            return (int)i;
    }
    return -1;
}

/* Publish `fresh` (ownership passes) unless its key is there already (a racing insert on
 * a Python without a GIL; then fresh is freed). The slot, or -1 when the table is full;
 * *added says whether fresh went in. */
static int table_put(table_t *t, pykey_t *fresh, bool *added) {
    int at = -1;
    *added = false;
    pthread_mutex_lock(&g_insert);
    if (t->used < SLOTS / 4 * 3) {
        uint32_t i = slot_of(fresh->code, fresh->n);
        for (;; i = (i + 1) & (SLOTS - 1)) {
            pykey_t *e = atomic_load_explicit(&t->slot[i], memory_order_acquire);
            if (!e) {
                atomic_store_explicit(&t->slot[i], fresh, memory_order_release);
                t->used++;
                *added = true;
                break;
            }
            if (e->code == fresh->code && e->n == fresh->n)
                break;
        }
        at = (int)i;
    }
    pthread_mutex_unlock(&g_insert);
    if (!*added)
        free(fresh);
    return at;
}

static pyframe_t *line_entry(uint32_t id) {
    return (pyframe_t *)atomic_load_explicit(&g_lines.slot[id - 1], memory_order_acquire);
}

static void *lookup(const char *name) { return vg__dlsym(RTLD_DEFAULT, name); }

void vg__pyframes_init(void) {
#define PY(field, name) *(void **)&py.field = lookup(name)
    PY(IsInitialized, "Py_IsInitialized"); /* (also for vg__pyframes_missed) */
    if (!vg__opt.python_frames || !vg__opt.stack_depth)
        return;
    PY(IsFinalizing, "Py_IsFinalizing"); /* 3.13 */
    if (!py.IsFinalizing)
        PY(IsFinalizing, "_Py_IsFinalizing"); /* 3.7 to 3.12 */
    PY(GILState_GetThisThreadState, "PyGILState_GetThisThreadState");
    PY(GILState_Ensure, "PyGILState_Ensure");
    PY(GILState_Release, "PyGILState_Release");
    PY(ThreadState_GetFrame, "PyThreadState_GetFrame"); /* 3.9 */
    PY(Frame_GetBack, "PyFrame_GetBack");
    PY(Frame_GetCode, "PyFrame_GetCode");
    PY(Frame_GetLineNumber, "PyFrame_GetLineNumber");
    PY(Object_GetAttrString, "PyObject_GetAttrString");
    PY(Unicode_AsUTF8, "PyUnicode_AsUTF8");
    PY(IncRef, "Py_IncRef");
    PY(DecRef, "Py_DecRef");
    PY(Err_Fetch, "PyErr_Fetch");
    PY(Err_Restore, "PyErr_Restore");
#undef PY
    void **all = (void **)&py;
    for (size_t i = 0; i < offsetof(__typeof__(py), Frame_GetLasti) / sizeof(void *); i++) {
        if (!all[i]) {
            if (vg__opt.verbose)
                vg__log("python_frames: no Python 3.9+ interpreter in this process; sites "
                        "are C backtraces");
            return;
        }
    }
    *(void **)&py.Frame_GetLasti = lookup("PyFrame_GetLasti");
    *(void **)&py.Code_Addr2Line = lookup("PyCode_Addr2Line");
    if (!py.Code_Addr2Line)
        py.Frame_GetLasti = NULL;
    vg__pyframes_on = py.IsInitialized() != 0;
}

static void clear_error(void) { /* (Py_DecRef takes NULL) */
    void *t, *v, *tb;
    py.Err_Fetch(&t, &v, &tb);
    py.DecRef(t);
    py.DecRef(v);
    py.DecRef(tb);
}

/* A copy of a string attribute of a code object, or "?" (the GIL is held). */
static void attr_text(void *code, const char *name, char *out, size_t n) {
    snprintf(out, n, "?");
    void *o = py.Object_GetAttrString(code, name);
    const char *s = o ? py.Unicode_AsUTF8(o) : NULL;
    if (s)
        snprintf(out, n, "%s", s);
    else
        clear_error();
    py.DecRef(o);
}

static bool ends_with(const char *s, const char *end) {
    size_t n = strlen(s), m = strlen(end);
    return n >= m && strcmp(s + n - m, end) == 0;
}

/* Frames that name nothing the user wrote, left out of the stacks:
 * - nn.Module's __call__ machinery (Module._wrapped_call_impl, Module._call_impl), which
 *   sits between every two modules of a model's stack and would push the user's own
 *   lines past stack_depth;
 * - what starts a script: runpy (python -m, and python -m vramguard run's run_path) and
 *   vramguard's own launcher, so a stack ends at the script's <module> line. */
static bool is_plumbing(const char *func, const char *file) {
    if (ends_with(file, "torch/nn/modules/module.py"))
        return ends_with(func, "_call_impl");
    return strcmp(file, "<frozen runpy>") == 0 || ends_with(file, "/runpy.py") ||
           ends_with(file, "/vramguard/__main__.py");
}

/* The frame id of (code, line), interning it (the GIL is held); 0 when the table is full. */
static uint32_t intern(void *code, int line) {
    int at = table_find(&g_lines, code, line);
    if (at >= 0)
        return (uint32_t)at + 1;
    /* New: its names, read with any pending exception of the thread set aside. */
    char func[256], file[1024];
    void *et, *ev, *tb;
    py.Err_Fetch(&et, &ev, &tb);
    attr_text(code, "co_qualname", func, sizeof func); /* 3.11: Class.method */
    if (strcmp(func, "?") == 0)
        attr_text(code, "co_name", func, sizeof func);
    attr_text(code, "co_filename", file, sizeof file);
    py.Err_Restore(et, ev, tb);
    size_t len = strlen(func) + strlen(file) + 32;
    pyframe_t *fresh = malloc(sizeof *fresh + len);
    if (!fresh)
        return 0;
    fresh->key = (pykey_t){code, line};
    fresh->plumbing = is_plumbing(func, file);
    snprintf(fresh->text, len, "%s (%s:%d)", func, file, line);
    bool added;
    at = table_put(&g_lines, &fresh->key, &added);
    if (added)
        py.IncRef(code);
    return at >= 0 ? (uint32_t)at + 1 : 0;
}

/* The id of frame f's line (the GIL is held). */
static uint32_t frame_id(void *f, void *code) {
    int lasti = py.Frame_GetLasti ? py.Frame_GetLasti(f) : -1;
    if (lasti < 0)
        return intern(code, py.Frame_GetLineNumber(f));
    int at = table_find(&g_pcs, code, lasti);
    if (at >= 0)
        return ((pc_entry_t *)atomic_load_explicit(&g_pcs.slot[at], memory_order_acquire))->id;
    uint32_t id = intern(code, py.Code_Addr2Line(code, lasti));
    pc_entry_t *fresh = id ? malloc(sizeof *fresh) : NULL;
    if (fresh) {
        *fresh = (pc_entry_t){{code, lasti}, id};
        bool added;
        table_put(&g_pcs, &fresh->key, &added);
    }
    return id;
}

int vg__pyframes_capture(uintptr_t *out, int max) {
    if (!vg__pyframes_on || vg__in_signal_handler || max <= 0)
        return 0;
    if (!py.IsInitialized() || py.IsFinalizing() || !py.GILState_GetThisThreadState())
        return 0; /* (tensors freed while the interpreter shuts down: C frames) */
    int gil = py.GILState_Ensure();
    int n = 0;
    void *f = py.ThreadState_GetFrame(py.GILState_GetThisThreadState());
    while (f && n < max) {
        void *code = py.Frame_GetCode(f);
        uint32_t id = code ? frame_id(f, code) : 0;
        if (code)
            py.DecRef(code);
        pyframe_t *e = id ? line_entry(id) : NULL;
        if (!e || !e->plumbing)
            out[n++] = VG_PYFRAME_TAG | id;
        void *back = py.Frame_GetBack(f);
        py.DecRef(f);
        f = back;
    }
    if (f)
        py.DecRef(f);
    py.GILState_Release(gil);
    return n;
}

bool vg__pyframes_missed(void) { /* (no lookup here: callers may hold a heap lock) */
    return !vg__opt.python_frames && vg__opt.stack_depth && py.IsInitialized &&
           py.IsInitialized();
}

const char *vg__pyframe_text(uintptr_t f) {
    if (!vg__is_pyframe(f))
        return NULL;
    uint32_t id = (uint32_t)(f & 0xffffffffu);
    if (id == 0 || id > SLOTS)
        return "? (a Python frame past vramguard's table)";
    pyframe_t *e = line_entry(id);
    return e ? e->text : "?";
}
