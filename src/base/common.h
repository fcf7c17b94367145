/* common.h — what every core file needs: attributes, errors, logging, output.
 *
 * Logging and reporting never allocate and never recurse: messages are formatted into a
 * fixed buffer on the stack and written with write(2) to the log sink (stderr unless the
 * `log` option names a file) or handed to the user's output callback. A thread-local
 * guard drops a message produced while the same thread is already writing one.
 */
#ifndef VG_COMMON_H
#define VG_COMMON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../include/vramguard.h"

#define VG_LIKELY(x) __builtin_expect(!!(x), 1)
#define VG_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define VG_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define VG_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
/* Thread-local variables on hot paths: the initial-exec model is a plain %fs-relative
 * load, where the default model in a shared library calls __tls_get_addr (10-20 ns each).
 * A dlopen'ed library takes initial-exec variables from glibc's small static TLS surplus,
 * so only small ones use it (under 128 bytes in all; docs/decisions.md A4). */
#define VG_TLS_FAST __thread __attribute__((tls_model("initial-exec")))

#define VG_LAST_ERROR_MAX 16384

/* Per-thread buffers for texts handed back to callers (the last error, vg_strerror of a
 * CUDA code, vg_option): allocated at a thread's first use and freed when it exits, so
 * that the library's static TLS stays a few pointers (see VG_TLS_FAST). If the memory
 * cannot be had, a shared buffer serves (texts may then mix between threads). */
typedef struct vg_thread_buf {
    char last_error[VG_LAST_ERROR_MAX];
    char strerror[160];
    char option[1032];
    char cu_name[32];
} vg_thread_buf_t;
vg_thread_buf_t *vg__tbuf(void);

#define VG_MIN(a, b) ((a) < (b) ? (a) : (b))
#define VG_MAX(a, b) ((a) > (b) ? (a) : (b))

static inline uint64_t vg__align_up(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }
static inline uint64_t vg__align_down(uint64_t x, uint64_t a) { return x & ~(a - 1); }

/* ---------------------------------------------------------------------------------------
 * Errors: set the calling thread's last-error text and return the status.
 * ------------------------------------------------------------------------------------- */
vg_status_t vg__error(vg_status_t st, const char *fmt, ...) VG_PRINTF(2, 3);
/* Append to the last-error text (for long explanations built in pieces). */
void vg__error_append(const char *fmt, ...) VG_PRINTF(1, 2);
void vg__error_clear(void);

/* ---------------------------------------------------------------------------------------
 * Logging ("vramguard: ..." lines) and report output (multi-line reports).
 * ------------------------------------------------------------------------------------- */
void vg__log(const char *fmt, ...) VG_PRINTF(1, 2);
void vg__vlog(const char *fmt, va_list ap);
/* Write text as is to the report sink (the `report` option, else the log sink). */
void vg__report_write(const char *text, size_t len);
/* Open the sinks named by the options (called once at initialisation). */
void vg__output_open(void);
/* Flush and close file sinks (exit). */
void vg__output_close(void);

/* A growable text buffer for building reports, JSON and tables. Allocates with the
 * process's malloc: never use it from a signal handler. */
typedef struct vg_buf {
    char *data;
    size_t len, cap;
    bool failed; /* an allocation failed: the text is truncated */
} vg_buf_t;
void vg__buf_printf(vg_buf_t *b, const char *fmt, ...) VG_PRINTF(2, 3);
void vg__buf_vprintf(vg_buf_t *b, const char *fmt, va_list ap);
void vg__buf_append(vg_buf_t *b, const char *s, size_t n);
void vg__buf_putc(vg_buf_t *b, char c);
void vg__buf_free(vg_buf_t *b);
/* JSON string literal (with quotes) of `s`. */
void vg__buf_json_str(vg_buf_t *b, const char *s);

/* Human-readable byte count: "4000 bytes", "1.50 MiB", "16.00 GiB". */
const char *vg__fmt_bytes(char out[32], uint64_t bytes);

/* files.c: the process's rank (RANK, else LOCAL_RANK, else -1); %p/%r/%% expansion; a
 * whole file written atomically (temporary + rename, never through a symlink). */
int vg__rank(void);
bool vg__expand_path(const char *pattern, char *out, size_t n);
vg_status_t vg__write_file(const char *pattern, const char *data, size_t len);

/* Monotonic clock in nanoseconds; the coarse one (a few ms resolution) costs less and is
 * enough for the timestamps of frees and events. */
uint64_t vg__now_ns(void);
uint64_t vg__now_coarse_ns(void);

/* Set by signal handlers that capture stacks (text.c defines it): what they call then does
 * nothing that is not async-signal-safe. */
extern VG_TLS_FAST bool vg__in_signal_handler;

#endif /* VG_COMMON_H */
