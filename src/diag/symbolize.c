/* symbolize.c — return addresses to "function (file:line)", only when a report is printed.
 *
 * dladdr() names the module (and exported symbols); file and line come from running
 * `llvm-addr2line -a -i -f -C -e MODULE ADDR...` (or GNU addr2line where LLVM's is not
 * installed) once per module for a batch of addresses, as AddressSanitizer runs its
 * symbolizer. LLVM's comes first because GNU addr2line (binutils 2.40, with gcc 12's DWARF
 * 5) names the wrong file for an out-of-line copy of a function defined in a header
 * ("ex_fill (s1_overrun.c:126)" for common.h:126). GCC's clone suffixes (".constprop.0",
 * ".isra.0", ".part.0", ".cold") are dropped from function names. A frame in inlined code
 * names the functions it was inlined into: "ex_fill (common.h:122) inlined into main
 * (app.c:40)" — the caller's line is what a report needs when the allocating or launching
 * call is a small inline wrapper (the CUDA runtime's templates, a project's helpers).
 * Without a symbolizer or debug information a frame reads "symbol+0xoff (module)" or
 * "module+0xoff". Results are cached by address.
 *
 * Never called from a signal handler or a hot path: it allocates and spawns a process.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "driver/driver.h"
#include "base/common.h"
#include "pyframes.h"
#include "sites.h"

extern char **environ;

typedef struct sym_entry {
    uintptr_t addr;
    char *text;
    struct sym_entry *next;
} sym_entry_t;

#define SYM_BUCKETS 4096
static sym_entry_t *g_cache[SYM_BUCKETS];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
/* The symbolizers, in the order tried; g_tool: the one that ran (or the next to try). */
static const char *const k_tools[] = {"llvm-addr2line", "addr2line"};
static int g_tool;

static size_t bucket(uintptr_t a) { return (size_t)((a * 0x9E3779B97F4A7C15ull) >> 52) % SYM_BUCKETS; }

static const char *cache_get(uintptr_t a) {
    for (sym_entry_t *e = g_cache[bucket(a)]; e; e = e->next)
        if (e->addr == a)
            return e->text;
    return NULL;
}

static const char *cache_put(uintptr_t a, char *text) {
    sym_entry_t *e = malloc(sizeof *e);
    if (!e) {
        free(text);
        return "??";
    }
    e->addr = a;
    e->text = text;
    e->next = g_cache[bucket(a)];
    g_cache[bucket(a)] = e;
    return text;
}

/* The main program's load address, to recognise it in dladdr() results. */
static int main_base_cb(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    uintptr_t lo = UINTPTR_MAX;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_LOAD && info->dlpi_phdr[i].p_vaddr < lo)
            lo = info->dlpi_phdr[i].p_vaddr;
    *(uintptr_t *)data = info->dlpi_addr + (lo == UINTPTR_MAX ? 0 : lo);
    return 1; /* the first object is the main program */
}

static const char *short_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* "func (file:line)", or "func" or "?? (file:line)"; NULL if both are unknown. */
static char *frame_text(char *func, char *loc) {
    bool known_func = strcmp(func, "??") != 0;
    bool known_loc = strncmp(loc, "??", 2) != 0;
    char *disc = strstr(loc, " (discriminator");
    if (disc)
        *disc = '\0';
    size_t len = strlen(loc); /* "file:0" or "file:?": no line known */
    if (len > 2 && loc[len - 2] == ':' && (loc[len - 1] == '0' || loc[len - 1] == '?'))
        loc[len - 2] = '\0';
    static const char *const clones[] = {".constprop.", ".isra.", ".part.", ".cold",
                                         ".lto_priv.", " [clone "};
    for (size_t c = 0; c < VG_ARRAY_LEN(clones); c++) {
        char *at = strstr(func, clones[c]);
        if (at && at != func)
            *at = '\0';
    }
    if (!known_func && !known_loc)
        return NULL;
    vg_buf_t t = {0};
    vg__buf_printf(&t, "%s", known_func ? func : "??");
    if (known_loc)
        vg__buf_printf(&t, " (%s)", loc);
    return t.data;
}

/* addr2line -a -i's answer for one address: lines[0] is the address, then a function and
 * a location per level, innermost first (the levels after the first are the functions
 * it was inlined into). One line: "f (f.h:3) inlined into main (app.c:42)"; a chain
 * longer than three levels keeps the innermost two and the outermost. */
static char *inline_text(char **lines, int nlines) {
    int levels = (nlines - 1) / 2;
    if (levels <= 0)
        return NULL;
    char *first = frame_text(lines[1], lines[2]);
    if (!first)
        return NULL;
    vg_buf_t b = {0};
    vg__buf_printf(&b, "%s", first);
    free(first);
    for (int l = 1; l < levels; l++) {
        if (levels > 3 && l == 2) { /* (the middle of a long chain) */
            vg__buf_printf(&b, " inlined into ...");
            l = levels - 1;
        }
        char *t = frame_text(lines[1 + 2 * l], lines[2 + 2 * l]);
        vg__buf_printf(&b, " inlined into %s", t ? t : "??");
        free(t);
    }
    return b.data;
}

/* Run addr2line on `n` addresses of one module; fills out[i] with "func (file:line)" (and
 * the functions it was inlined into) or NULL where it knows nothing. */
static void run_addr2line(const char *module, const uintptr_t *offs, int n, char **out) {
    for (int i = 0; i < n; i++)
        out[i] = NULL;
    if (g_tool >= (int)VG_ARRAY_LEN(k_tools))
        return;
    char **argv = calloc((size_t)n + 8, sizeof *argv);
    char (*hex)[24] = calloc((size_t)n, sizeof *hex);
    int pipefd[2] = {-1, -1};
    if (!argv || !hex || pipe2(pipefd, O_CLOEXEC) != 0) {
        free(argv);
        free(hex);
        return;
    }
    int k = 0;
    argv[k++] = NULL; /* (the tool's name, below) */
    argv[k++] = "-a"; /* (each answer starts with its address: -i makes it several lines) */
    argv[k++] = "-i";
    argv[k++] = "-f";
    argv[k++] = "-C";
    argv[k++] = "-e";
    argv[k++] = (char *)module;
    for (int i = 0; i < n; i++) {
        snprintf(hex[i], sizeof hex[i], "0x%lx", (unsigned long)offs[i]);
        argv[k++] = hex[i];
    }
    argv[k] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    /* Do not let the child inherit vramguard: it must not preload itself into addr2line. */
    int envn = 0;
    while (environ && environ[envn])
        envn++;
    char **env = calloc((size_t)envn + 1, sizeof *env);
    int e = 0;
    for (int i = 0; env && i < envn; i++)
        if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0 &&
            strncmp(environ[i], "CUDA_INJECTION64_PATH=", 22) != 0)
            env[e++] = environ[i];
    pid_t pid;
    int rc = -1;
    while (g_tool < (int)VG_ARRAY_LEN(k_tools)) { /* (one not installed: the next) */
        argv[0] = (char *)k_tools[g_tool];
        if ((rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, env ? env : environ)) == 0)
            break;
        g_tool++;
    }
    posix_spawn_file_actions_destroy(&fa);
    close(pipefd[1]);
    free(env);
    if (rc != 0) {
        close(pipefd[0]);
        free(argv);
        free(hex);
        return;
    }
    vg_buf_t b = {0};
    char chunk[4096];
    ssize_t r;
    while ((r = read(pipefd[0], chunk, sizeof chunk)) > 0 || (r < 0 && errno == EINTR))
        if (r > 0)
            vg__buf_append(&b, chunk, (size_t)r);
    close(pipefd[0]);
    int status;
    waitpid(pid, &status, 0);
    /* Per address: the address ("0x..."), then a function and file:line per level. An
     * address line comes where a function line would: after whole pairs. */
    char *lines[1 + 2 * 32];
    int i = -1, nl = 0, in_block = 0;
    char *save = NULL;
    for (char *line = b.data ? strtok_r(b.data, "\n", &save) : NULL;;
         line = strtok_r(NULL, "\n", &save)) {
        if (!line || (in_block % 2 == 0 && strncmp(line, "0x", 2) == 0)) {
            if (i >= 0)
                out[i] = inline_text(lines, nl);
            if (!line || ++i >= n)
                break;
            nl = 0;
            in_block = -1; /* (the address line itself) */
        }
        if (nl < (int)VG_ARRAY_LEN(lines))
            lines[nl++] = line;
        in_block++;
    }
    vg__buf_free(&b);
    free(argv);
    free(hex);
}

static uintptr_t main_base;     /* (both under g_lock, set once) */
static char main_path[4096];

static void main_program_locked(void) {
    if (main_base)
        return;
    dl_iterate_phdr(main_base_cb, &main_base);
    /* The child would read its own /proc/self/exe: resolve the link here. */
    ssize_t n = readlink("/proc/self/exe", main_path, sizeof main_path - 1);
    main_path[n > 0 ? n : 0] = '\0';
}

const char *vg__frame_module(uintptr_t addr) {
    Dl_info info;
    if (!dladdr((void *)(addr - 1), &info) || !info.dli_fname)
        return NULL;
    pthread_mutex_lock(&g_lock);
    main_program_locked();
    bool is_main = (uintptr_t)info.dli_fbase == main_base && main_path[0];
    pthread_mutex_unlock(&g_lock);
    return is_main ? main_path : info.dli_fname;
}

void vg__symbolize_batch(const uintptr_t *addrs, int n) {
    pthread_mutex_lock(&g_lock);
    main_program_locked();
    bool *done = calloc((size_t)n, 1);
    uintptr_t *offs = calloc((size_t)n, sizeof *offs);
    uintptr_t *which = calloc((size_t)n, sizeof *which);
    char **res = calloc((size_t)n, sizeof *res);
    for (int i = 0; done && offs && which && res && i < n; i++) {
        if (done[i] || cache_get(addrs[i]))
            continue;
        const char *py = vg__pyframe_text(addrs[i]); /* a Python line (pyframes.h) */
        if (py) {
            char *t = strdup(py);
            if (t)
                cache_put(addrs[i], t);
            done[i] = true;
            continue;
        }
        Dl_info info;
        uintptr_t pc = addrs[i] - 1; /* the call instruction, not the return address */
        if (!dladdr((void *)pc, &info) || !info.dli_fname) {
            char *t = NULL;
            if (asprintf(&t, "0x%lx", (unsigned long)addrs[i]) > 0)
                cache_put(addrs[i], t);
            done[i] = true;
            continue;
        }
        /* Gather every pending address of this module. */
        uintptr_t base = (uintptr_t)info.dli_fbase;
        bool is_main = base == main_base;
        const Elf64_Ehdr *eh = (const Elf64_Ehdr *)base;
        bool absolute = eh->e_type == ET_EXEC;
        const char *module = is_main && main_path[0] ? main_path : info.dli_fname;
        int k = 0;
        for (int j = i; j < n; j++) {
            if (done[j] || vg__is_pyframe(addrs[j]) || cache_get(addrs[j]))
                continue;
            Dl_info dj;
            if (!dladdr((void *)(addrs[j] - 1), &dj) || (uintptr_t)dj.dli_fbase != base)
                continue;
            which[k] = (uintptr_t)j;
            offs[k] = absolute ? addrs[j] - 1 : addrs[j] - 1 - base;
            k++;
        }
        run_addr2line(module, offs, k, res);
        for (int m = 0; m < k; m++) {
            int j = (int)which[m];
            done[j] = true;
            char *t = res[m];
            if (!t) {
                Dl_info dj;
                dladdr((void *)(addrs[j] - 1), &dj);
                const char *mod = is_main ? "program" : short_name(dj.dli_fname);
                if (dj.dli_sname && asprintf(&t, "%s+0x%lx (%s)", dj.dli_sname,
                                             (unsigned long)(addrs[j] - (uintptr_t)dj.dli_saddr),
                                             mod) < 0)
                    t = NULL;
                if (!t && asprintf(&t, "%s+0x%lx", mod, (unsigned long)(addrs[j] - base)) < 0)
                    t = NULL;
            }
            if (t)
                cache_put(addrs[j], t);
        }
    }
    free(done);
    free(offs);
    free(which);
    free(res);
    pthread_mutex_unlock(&g_lock);
}

/* Without running the symbolizer: the cached text, a Python frame's, or dladdr's
 * "symbol+0xoff (module)" / "module+0xoff" (nvtx.c names regions with it on the
 * allocation path). Returns whether the text is final (cached or Python). */
bool vg__symbolize_quick(uintptr_t addr, char *out, size_t n) {
    const char *py = vg__pyframe_text(addr);
    pthread_mutex_lock(&g_lock);
    const char *t = py ? py : cache_get(addr);
    if (t)
        snprintf(out, n, "%s", t);
    pthread_mutex_unlock(&g_lock);
    if (t)
        return true;
    Dl_info info;
    if (!dladdr((void *)(addr - 1), &info) || !info.dli_fname) {
        snprintf(out, n, "0x%lx", (unsigned long)addr);
        return false;
    }
    const char *mod = info.dli_fname[0] ? short_name(info.dli_fname) : "program";
    if (info.dli_sname)
        snprintf(out, n, "%s+0x%lx (%s)", info.dli_sname,
                 (unsigned long)(addr - (uintptr_t)info.dli_saddr), mod);
    else
        snprintf(out, n, "%s+0x%lx", mod, (unsigned long)(addr - (uintptr_t)info.dli_fbase));
    return false;
}

bool vg__symbolize_known(uintptr_t addr) {
    if (vg__is_pyframe(addr))
        return true;
    pthread_mutex_lock(&g_lock);
    bool known = cache_get(addr) != NULL;
    pthread_mutex_unlock(&g_lock);
    return known;
}

static bool program_start(const char *t) {
    if (strncmp(t, "__libc_start", 12) == 0)
        return true;
    return strncmp(t, "_start", 6) == 0 && (t[6] == ' ' || t[6] == '+' || t[6] == '\0');
}

uint32_t vg__site_symbolize(const vg_site_t *s) {
    vg__symbolize_batch(s->frames, (int)s->nframes);
    for (uint32_t i = 1; i < s->nframes; i++) /* (a stack of start frames alone: all) */
        if (!vg__is_pyframe(s->frames[i]) && program_start(vg__symbolize(s->frames[i])))
            return i; /* (a Python function may be called _start) */
    return s->nframes;
}

uint64_t vg__site_text_key(uint32_t id) {
    const vg_site_t *s = id ? vg__site(id) : NULL;
    if (!s)
        return 0;
    uint64_t h = 1469598103934665603ull;
    for (uint32_t i = 0, n = vg__site_symbolize(s); i < n; i++) {
        for (const char *c = vg__symbolize(s->frames[i]); *c; c++)
            h = (h ^ (unsigned char)*c) * 1099511628211ull;
        h = (h ^ '\n') * 1099511628211ull;
    }
    return h;
}

const char *vg__symbolize(uintptr_t addr) {
    pthread_mutex_lock(&g_lock);
    const char *t = cache_get(addr);
    pthread_mutex_unlock(&g_lock);
    if (t)
        return t;
    vg__symbolize_batch(&addr, 1);
    pthread_mutex_lock(&g_lock);
    t = cache_get(addr);
    pthread_mutex_unlock(&g_lock);
    return t ? t : "??";
}

/* ---------------------------------------------------------------------------------------
 * Kernel names: the driver gives a C++ kernel's mangled name
 * (_ZN2at6native29vectorized_elementwise_kernelILi4E...). Demangled with the C++
 * runtime's __cxa_demangle when the process has one (every C++ program, PyTorch too; a
 * C program's kernels are rarely C++), then shortened to what a user reads as its name:
 * no return type, no parameter list. The texts live as long as the process (a list,
 * reachable for leak checkers), one per kernel a program launches.
 * ------------------------------------------------------------------------------------- */

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);

typedef struct kernel_name {
    struct kernel_name *next;
    char text[]; /* the mangled name, then the shown one */
} kernel_name_t;

static const char *shown(const kernel_name_t *k) { return k->text + strlen(k->text) + 1; }

static kernel_name_t *g_kernel_names;
static pthread_mutex_t g_kernel_names_lock = PTHREAD_MUTEX_INITIALIZER;

/* Shorten a demangled function name in place: "void f<T>(int, T)" -> "f<T>". */
static void shorten(char *d) {
    size_t n = strlen(d);
    if (n && d[n - 1] == ')') { /* the parameter list: back to its '(' */
        int depth = 0;
        for (size_t i = n; i-- > 0;) {
            depth += d[i] == ')' ? 1 : d[i] == '(' ? -1 : 0;
            if (depth == 0) {
                d[i] = '\0';
                break;
            }
        }
    }
    if (strncmp(d, "void ", 5) == 0) /* (a template's return type: kernels return void) */
        memmove(d, d + 5, strlen(d + 5) + 1);
}

const char *vg__kernel_name_short(const char *name, char *buf, size_t n) {
    size_t len = name ? strlen(name) : 0;
    if (len <= VG_KERNEL_SHORT || n < VG_KERNEL_SHORT + 1)
        return name;
    const size_t tail = 24, head = VG_KERNEL_SHORT - tail - 3;
    snprintf(buf, n, "%.*s...%s", (int)head, name, name + len - tail);
    return buf;
}

const char *vg__kernel_name(const char *name) {
    if (!name || strncmp(name, "_Z", 2) != 0)
        return name;
    pthread_mutex_lock(&g_kernel_names_lock);
    for (const kernel_name_t *k = g_kernel_names; k; k = k->next) {
        if (strcmp(k->text, name) == 0) {
            pthread_mutex_unlock(&g_kernel_names_lock);
            return shown(k);
        }
    }
    pthread_mutex_unlock(&g_kernel_names_lock);
    demangle_fn demangle = (demangle_fn)vg__dlsym(RTLD_DEFAULT, "__cxa_demangle");
    if (!demangle) { /* (loaded only locally: a Python extension's C++ runtime) */
        void *cxx = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_NOLOAD);
        demangle = cxx ? (demangle_fn)vg__dlsym(cxx, "__cxa_demangle") : NULL;
    }
    int status = -1;
    char *d = demangle ? demangle(name, NULL, NULL, &status) : NULL;
    if (status != 0 || !d || !*d) {
        free(d);
        return name;
    }
    shorten(d);
    size_t m = strlen(name), n = strlen(d);
    kernel_name_t *k = n ? malloc(sizeof *k + m + n + 2) : NULL;
    if (!k) {
        free(d);
        return name;
    }
    memcpy(k->text, name, m + 1);
    memcpy(k->text + m + 1, d, n + 1);
    free(d);
    pthread_mutex_lock(&g_kernel_names_lock); /* (two threads may add one name twice) */
    k->next = g_kernel_names;
    g_kernel_names = k;
    pthread_mutex_unlock(&g_kernel_names_lock);
    return shown(k);
}
