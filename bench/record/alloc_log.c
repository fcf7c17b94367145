/* alloc_log.c — an LD_PRELOAD shim that records the allocations of c10's CPU allocator
 * (PyTorch's CPU tensors) as an RMM-format CSV trace for `vramguard replay`.
 *
 *   gcc -O2 -shared -fPIC -o alloc_log.so alloc_log.c -ldl -lpthread
 *   VG_ALLOC_LOG=trace.csv LD_PRELOAD=./alloc_log.so python3 script.py
 *
 * c10::alloc_cpu (libc10.so) allocates with posix_memalign(&p, 64, n) — the only
 * posix_memalign call in Debian's libc10.so.1.13 — and c10::free_cpu is `jmp free@plt`.
 * So the shim interposes posix_memalign and free:
 *   - a posix_memalign whose return address lies in libc10.so's executable mapping is a
 *     c10 allocation: it goes into a table of live c10 blocks (always, from the start);
 *   - a free of a pointer in that table is a c10 free: it leaves the table.
 * Logging starts when the program calls vg_alloc_log_enable(1) (from Python:
 * ctypes.CDLL(None).vg_alloc_log_enable(1)); the blocks live at that moment are written
 * first, as allocations at time 0, oldest first. vg_alloc_log_enable(0) ends the trace
 * (blocks live then stay live in it); a trace is started once per process.
 * VG_ALLOC_LOG_START=load starts it when the shim loads instead (nothing live yet).
 *
 * Output: Thread,Time,Action,Pointer,Size,Stream with Thread the OS thread id, Time in
 * microseconds since logging started, Size the size asked of c10 (for a free: the size it
 * was allocated with) and Stream 0. Lines are formatted by hand into an mmap'd buffer and
 * written with write(2) when it is full and at the end: nothing in the hooks allocates,
 * locks a stdio stream or can re-enter the hooks. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define TABLE_BITS 20 /* 1 Mi slots (32 MiB of address space, touched as used) */
#define TABLE_CAP (1u << TABLE_BITS)
#define TABLE_MAX (TABLE_CAP / 4 * 3)
#define BUF_CAP (8u << 20)
#define C10_ALIGN 64 /* alloc_cpu's alignment: other pointers are skipped unlocked */

typedef struct {
    uintptr_t ptr; /* 0: empty slot */
    size_t size;
    uint64_t seq; /* allocation order, to write the blocks live at the start in order */
    uint32_t tid;
    uint32_t logged; /* its allocation is in the trace */
} entry_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static entry_t *table;      /* mmap'd on the first c10 allocation */
static size_t table_n;      /* entries in use */
static atomic_size_t live_n; /* the same, read unlocked to skip free() fast */
static uint64_t next_seq;
static int table_full;      /* warned once: later c10 allocations are not tracked */

/* libc10.so's executable mapping, found once. */
static atomic_int text_state; /* 0 unknown, 1 found */
static atomic_uintptr_t text_lo, text_hi;

static int (*real_posix_memalign)(void **, size_t, size_t);
static void (*real_free)(void *);
extern void __libc_free(void *);

static int log_fd = -1;
static int logging; /* under lock: 1 while the trace is being written */
static int log_done; /* the trace was started (and maybe ended) */
static struct timespec t0;
static char *buf;
static size_t buf_len;

static __thread int in_hook __attribute__((tls_model("initial-exec")));

static void say(const char *msg) {
    ssize_t r = write(2, msg, strlen(msg));
    (void)r;
}

static int find_text(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    const char *name = info->dlpi_name;
    if (!name || !strstr(name, "/libc10.so"))
        return 0;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;
        if (a < lo)
            lo = a;
        if (a + ph->p_memsz > hi)
            hi = a + ph->p_memsz;
    }
    if (hi == 0)
        return 0;
    atomic_store(&text_lo, lo);
    atomic_store(&text_hi, hi);
    return 1;
}

/* Is this return address inside libc10.so's code? Until libc10.so is loaded each call
 * looks again (dl_iterate_phdr's lock is recursive, and the callback does not allocate). */
static int from_c10(uintptr_t ra) {
    if (!atomic_load_explicit(&text_state, memory_order_acquire)) {
        if (!dl_iterate_phdr(find_text, NULL))
            return 0;
        atomic_store_explicit(&text_state, 1, memory_order_release);
    }
    return ra >= atomic_load(&text_lo) && ra < atomic_load(&text_hi);
}

static size_t slot_of(uintptr_t p) {
    return (size_t)(((uint64_t)p * 0x9E3779B97F4A7C15ull) >> (64 - TABLE_BITS));
}

/* Under lock. Returns the slot of p, or the empty slot where it would go. */
static size_t table_find(uintptr_t p) {
    size_t s = slot_of(p);
    while (table[s].ptr && table[s].ptr != p)
        s = (s + 1) & (TABLE_CAP - 1);
    return s;
}

/* Under lock: empty slot s, shifting back the entries of the probe run behind it. */
static void table_erase(size_t s) {
    table[s].ptr = 0;
    for (size_t i = (s + 1) & (TABLE_CAP - 1); table[i].ptr; i = (i + 1) & (TABLE_CAP - 1)) {
        size_t h = slot_of(table[i].ptr);
        int in_range = s <= i ? (h > s && h <= i) : (h > s || h <= i);
        if (!in_range) {
            table[s] = table[i];
            table[i].ptr = 0;
            s = i;
        }
    }
}

static void flush_buf(void) {
    size_t off = 0;
    while (off < buf_len) {
        ssize_t w = write(log_fd, buf + off, buf_len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            say("alloc_log: write to VG_ALLOC_LOG failed; trace truncated\n");
            break;
        }
        off += (size_t)w;
    }
    buf_len = 0;
}

static char *put_dec(char *o, uint64_t v) {
    char t[24];
    int n = 0;
    do
        t[n++] = (char)('0' + v % 10);
    while (v /= 10);
    while (n)
        *o++ = t[--n];
    return o;
}

static char *put_hex(char *o, uint64_t v) {
    char t[24];
    int n = 0;
    do
        t[n++] = "0123456789abcdef"[v & 15];
    while (v >>= 4);
    *o++ = '0';
    *o++ = 'x';
    while (n)
        *o++ = t[--n];
    return o;
}

static uint64_t now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    int64_t ns = (int64_t)(t.tv_sec - t0.tv_sec) * 1000000000 + (t.tv_nsec - t0.tv_nsec);
    return ns < 0 ? 0 : (uint64_t)ns / 1000;
}

/* Under lock, while logging. */
static void emit(uint32_t tid, uint64_t time_us, int alloc, uintptr_t p, size_t size) {
    if (BUF_CAP - buf_len < 128)
        flush_buf();
    char *o = buf + buf_len;
    o = put_dec(o, tid);
    *o++ = ',';
    o = put_dec(o, time_us);
    *o++ = ',';
    memcpy(o, alloc ? "allocate," : "free,", alloc ? 9 : 5);
    o += alloc ? 9 : 5;
    o = put_hex(o, p);
    *o++ = ',';
    o = put_dec(o, size);
    memcpy(o, ",0\n", 3);
    o += 3;
    buf_len = (size_t)(o - buf);
}

static uint32_t gettid_u32(void) { return (uint32_t)syscall(SYS_gettid); }

static void resolve(void) {
    in_hook++; /* dlsym may free(): that free goes straight to glibc */
    if (!real_posix_memalign)
        real_posix_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
    if (!real_free)
        real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    in_hook--;
}

/* Under lock: record a new c10 block (and log it while logging). */
static void track(uintptr_t p, size_t size) {
    if (!table) {
        void *m = mmap(NULL, (size_t)TABLE_CAP * sizeof(entry_t), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) {
            say("alloc_log: mmap of the live table failed; not tracking\n");
            table_full = 1;
            return;
        }
        table = m;
    }
    if (table_n >= TABLE_MAX) {
        if (!table_full)
            say("alloc_log: live table full; later c10 allocations are not tracked\n");
        table_full = 1;
        return;
    }
    size_t s = table_find(p);
    uint32_t tid = gettid_u32();
    if (table[s].ptr) {
        /* The pointer is live already: a free we did not see. Keep the trace consistent. */
        say("alloc_log: c10 pointer allocated twice without a free seen\n");
        if (logging && table[s].logged)
            emit(table[s].tid, now_us(), 0, p, table[s].size);
    } else {
        table_n++;
        atomic_store_explicit(&live_n, table_n, memory_order_relaxed);
    }
    table[s] = (entry_t){p, size, next_seq++, tid, (uint32_t)logging};
    if (logging)
        emit(tid, now_us(), 1, p, size);
}

int posix_memalign(void **out, size_t align, size_t size) {
    uintptr_t ra = (uintptr_t)__builtin_return_address(0);
    if (!real_posix_memalign)
        resolve();
    int rc = real_posix_memalign(out, align, size);
    if (rc != 0 || in_hook || table_full || !from_c10(ra))
        return rc;
    in_hook++;
    pthread_mutex_lock(&lock);
    track((uintptr_t)*out, size);
    pthread_mutex_unlock(&lock);
    in_hook--;
    return rc;
}

void free(void *ptr) {
    uintptr_t p = (uintptr_t)ptr;
    if (p && !(p & (C10_ALIGN - 1)) && !in_hook &&
        atomic_load_explicit(&live_n, memory_order_relaxed)) {
        in_hook++;
        pthread_mutex_lock(&lock);
        if (table) {
            size_t s = table_find(p);
            if (table[s].ptr == p) {
                if (logging && table[s].logged)
                    emit(gettid_u32(), now_us(), 0, p, table[s].size);
                table_erase(s);
                table_n--;
                atomic_store_explicit(&live_n, table_n, memory_order_relaxed);
            }
        }
        pthread_mutex_unlock(&lock);
        in_hook--;
    }
    if (!real_free) {
        if (in_hook) { /* from inside dlsym while resolving */
            __libc_free(ptr);
            return;
        }
        resolve();
    }
    real_free(ptr);
}

/* Heap sort of live entries by seq (qsort may allocate). */
static void sift(entry_t *a, size_t i, size_t n) {
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            return;
        if (c + 1 < n && a[c + 1].seq > a[c].seq)
            c++;
        if (a[i].seq >= a[c].seq)
            return;
        entry_t t = a[i];
        a[i] = a[c];
        a[c] = t;
        i = c;
    }
}

/* Under lock. Returns 0, or -1 when the trace cannot be started. */
static int start_log(void) {
    const char *path = getenv("VG_ALLOC_LOG");
    if (!path || !*path) {
        say("alloc_log: VG_ALLOC_LOG is not set; not logging\n");
        return -1;
    }
    log_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (log_fd < 0) {
        say("alloc_log: cannot open VG_ALLOC_LOG; not logging\n");
        return -1;
    }
    buf = mmap(NULL, BUF_CAP, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) {
        buf = NULL;
        close(log_fd);
        log_fd = -1;
        return -1;
    }
    static const char header[] = "Thread,Time,Action,Pointer,Size,Stream\n";
    memcpy(buf, header, sizeof header - 1);
    buf_len = sizeof header - 1;
    /* The blocks live now, oldest first, at time 0. */
    if (table_n) {
        size_t bytes = table_n * sizeof(entry_t);
        entry_t *a = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (a == MAP_FAILED) {
            say("alloc_log: mmap failed; not logging\n");
            return -1;
        }
        size_t n = 0;
        for (size_t s = 0; s < TABLE_CAP; s++)
            if (table[s].ptr)
                a[n++] = table[s];
        for (size_t i = n / 2; i-- > 0;)
            sift(a, i, n);
        for (size_t e = n; e > 1; e--) {
            entry_t t = a[0];
            a[0] = a[e - 1];
            a[e - 1] = t;
            sift(a, 0, e - 1);
        }
        for (size_t i = 0; i < n; i++)
            emit(a[i].tid, 0, 1, a[i].ptr, a[i].size);
        munmap(a, bytes);
        for (size_t s = 0; s < TABLE_CAP; s++)
            if (table[s].ptr)
                table[s].logged = 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t0); /* after the scan: the next event follows at once */
    logging = 1;
    log_done = 1;
    return 0;
}

/* Under lock. */
static void stop_log(void) {
    if (!logging)
        return;
    logging = 0;
    flush_buf();
    close(log_fd);
    log_fd = -1;
}

/* on != 0: start the trace (once per process); on == 0: end it. Returns 0 on success. */
int vg_alloc_log_enable(int on) {
    int rc = 0;
    in_hook++;
    pthread_mutex_lock(&lock);
    if (on) {
        if (log_done && !logging) {
            say("alloc_log: the trace was ended already; it is started once per process\n");
            rc = -1;
        } else if (!logging) {
            rc = start_log();
        }
    } else {
        stop_log();
    }
    pthread_mutex_unlock(&lock);
    in_hook--;
    return rc;
}

__attribute__((constructor)) static void alloc_log_init(void) {
    resolve();
    const char *start = getenv("VG_ALLOC_LOG_START");
    if (start && strcmp(start, "load") == 0)
        vg_alloc_log_enable(1);
}

__attribute__((destructor)) static void alloc_log_fini(void) { vg_alloc_log_enable(0); }
