/* options.h — every vramguard option in one table (VRAMGUARD_OPTIONS and CLI flags).
 *
 * Syntax: "key=value,key=value". Values are never silently defaulted: an unknown key or a
 * bad value is an error that names the key and the value. Types:
 *   BOOL   1/0, true/false, yes/no, on/off
 *   SIZE   bytes with an optional binary suffix: 512, 64K, 16M, 15G, 1T (KB/KiB/... too),
 *          within the range in the `allowed` column when there is one ("16..1M")
 *   INT    a decimal integer in [min, max]
 *   STR    free text (a path to read); "" allowed where the default is ""
 *   PATH   a file vramguard writes (%p: pid, %r: rank); "" = none. vg__options_check
 *          also checks that it can be created (its folder exists and is writable)
 *   LIST   text, a comma-separated list: in an options string its items run on to the next
 *          key=value (memcheck_kernels=*gather*,*index*,mode=memcheck)
 *   ENUM   one of the words in the `allowed` column
 *   LIMIT  a SIZE, or a fraction of the device's memory in (0, 1] such as 0.2; 0 = none
 *   SHARE  a SIZE, or a percentage of the host's RAM in (0, 100] such as 50%; 0 = none
 *
 * Precedence, lowest first: default < VRAMGUARD_OPTIONS (read with secure_getenv, so
 * ignored in set-uid programs) < vg_init()'s string / CLI flags.
 */
#ifndef VG_OPTIONS_H
#define VG_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "../../include/vramguard.h"
#include "common.h"

/* X(key, TYPE, default, allowed/range, help) */
#define VG_OPTIONS(X)                                                                        \
    X(driver, STR, "libcuda.so.1", "",                                                       \
      "CUDA driver library to load (a path to vgsim's libcuda.so.1 runs on the CPU)")        \
    X(mode, ENUM, "fast", "fast|guard|memcheck",                                             \
      "fast: caching allocator only; guard: redzones, poison, quarantine and checks; "      \
      "memcheck: guard mode plus every load and store of every kernel checked on the "      \
      "device (NVIDIA's Compute Sanitizer API; docs/memcheck.md)")                           \
    X(verbose, BOOL, "0", "",                                                                \
      "print every option and where its value came from, the driver and each device as "   \
      "vramguard sets it up, each device's peak memory and counts at exit, the peak pinned " \
      "host memory, and a free of pinned memory that waited for a copy")                   \
    X(log, PATH, "", "", "file for vramguard's messages (default: standard error)")           \
    X(limit, LIMIT, "0", "",                                                                 \
      "cap on device memory per device: bytes (15G) or a fraction (0.2); 0 = none")          \
    X(vmm, ENUM, "auto", "auto|on|off",                                                      \
      "virtual-memory segments (auto: when the driver and device support them)")             \
    X(slot_min, LIMIT, "0.006", "",                                                          \
      "requests of at least this size (bytes, or a fraction of the device's memory: 0.006 is " \
      "515 MB on 80 GB) that need new memory, of a size freed before, get an address range " \
      "no neighbour merges into, kept for tensors of that size (0: never)")                  \
    X(small_max, SIZE, "1M", "0..1G",                                                         \
      "requests up to this size are served from an address range of their own, as PyTorch's " \
      "small pool: small tensors that live long then never pin the holes large ones leave "  \
      "(0: one range for all)")                                                              \
    X(plan, ENUM, "off", "off|learn|on",                                                     \
      "learn: find the program's training step from the requests it makes, and work out "    \
      "what a plan placing two steps would reserve (vramguard replay and verbose=1 say); "   \
      "on: also place the step's tensors where the plan puts them, moving idle pages to "    \
      "them; a step interrupted (an evaluation) takes its plan up again when it comes back; " \
      "with gradient accumulation, the whole step (up to 12288 requests) is planned once "   \
      "the micro-batch's plan was dropped at two optimizer steps; "                          \
      "with no step to follow, page moves stop once four times the memory has moved "        \
      "(fast mode; docs/allocator.md, docs/decisions.md A13)")                               \
    X(stack_depth, INT, "12", "0..64",                                                       \
      "host frames captured per allocation site (0 = no backtraces)")                        \
    X(python_frames, BOOL, "0", "",                                                         \
      "in a Python program, sites are the Python lines that allocated (model.py:42) rather "  \
      "than C frames; the PyTorch package turns it on in guard mode")                       \
    X(unwind, ENUM, "fp", "fp|full",                                                         \
      "stack capture: fp (frame pointers, ~1 ns a frame) or full (unwind tables: complete "  \
      "stacks through code without frame pointers, ~1 us an allocation)")                   \
    X(trace, PATH, "", "",                                                                    \
      "record every allocation and free to this file, as RMM's logging adaptor does")       \
    X(snapshot, PATH, "", "",                                                                 \
      "write a snapshot (JSON) to this file at exit, at the first OOM and the first error; "    \
      "%p pid, %r rank")                                                                    \
    X(snapshot_events, INT, "-1", "-1..100000000",                                          \
      "allocator events kept per device for snapshots' timelines (-1: 100000 when "          \
      "snapshot= is set, else none; recording costs the allocator ~15%)")                    \
    X(redzone, SIZE, "256", "16..1M", "guard: bytes of redzone at least, on each side")     \
    X(quarantine, SIZE, "1G", "0..1T",                                                       \
      "guard: freed bytes kept poisoned before reuse (shrinks when memory runs short)")      \
    X(poison_bytes, SIZE, "64K", "0..1T",                                                    \
      "guard: freed blocks up to this size are poisoned whole (0: every block)")            \
    X(poison_ends, SIZE, "4K", "16..1G",                                                     \
      "guard: larger freed blocks are poisoned at their first and last this many bytes")    \
    X(memcheck_every, INT, "1", "1..1000000000",                                            \
      "memcheck: check every Nth kernel launch (1: all), for long runs")                     \
    X(memcheck_kernels, LIST, "", "",                                                        \
      "memcheck: check only kernels whose name matches one of these comma-separated shell "  \
      "patterns (*gather*,*index*; empty: all); modules that define none of them are not "   \
      "patched, and run at full speed")                                                      \
    X(initcheck, BOOL, "0", "",                                                             \
      "memcheck: also report a kernel's read of memory never written since its allocation "  \
      "(an init bitmap of 1/32 of each segment, set by every store, copy and memset, and "  \
      "for Hopper's tensor-memory stores by the tensor maps a launch carries: "              \
      "docs/memcheck.md)")                                                                   \
    X(sanitizer_lib, STR, "", "",                                                           \
      "memcheck: the Compute Sanitizer API library (default: libsanitizer-public.so of the " \
      "CUDA toolkit's compute-sanitizer, found under $CUDA_HOME, /usr/local/cuda or PATH)")  \
    X(free_batch, INT, "1", "1..16",                                                        \
      "guard, when not deferred: frees whose check and poison share one launch (1: at once, "  \
      "so a kernel that still uses a freed block is caught; more: fewer launches)")            \
    X(guard_defer, ENUM, "auto", "auto|on|off",                                              \
      "guard: hold redzone fills and free checks until the stream's next launch, copy, "     \
      "event or synchronisation, and launch them together (auto: when vramguard sees every " \
      "launch: under vramguard run)")                                                        \
    X(host_race, ENUM, "auto", "auto|on|off",                                               \
      "vramguard run: protect pinned buffers while an async copy uses them (auto: in guard "  \
      "mode)")                                                                               \
    X(host_race_action, ENUM, "wait", "wait|abort",                                         \
      "what a host access to a buffer in flight does: wait for the copy, or abort")          \
    X(host_race_wait_ms, INT, "10000", "1..3600000",                                        \
      "how long such an access waits for the copy (milliseconds); a copy that has not "      \
      "completed by then (a stream waiting for the very thread that waits) stops being "     \
      "guarded and the access goes on")                                                      \
    X(free_order, ENUM, "auto", "auto|on|off",                                              \
      "guard: report a free while a kernel or copy on another stream that was given the "   \
      "memory is not ordered before it (a missing record_stream or event wait; auto: under " \
      "vramguard run, which sees every launch, event and synchronisation)")                  \
    X(check_sync, BOOL, "1", "",                                                            \
      "guard: check every allocation at each synchronisation vramguard sees (at a stream " \
      "synchronisation, those of streams whose work has completed)")                        \
    X(report, PATH, "", "", "file for error reports (default: the log); %p pid, %r rank")    \
    X(report_json, PATH, "", "",                                                             \
      "write the reports as JSON to this file at exit; %p pid, %r rank")                     \
    X(suppressions, STR, "", "",                                                            \
      "file of reports not to show, one KIND:PATTERN per line (leak:libfoo.so, "             \
      "unordered_free:nccl*): PATTERN is matched against the report's stacks, libraries "  \
      "and kernel")                                                                          \
    X(default_suppressions, BOOL, "1", "",                                                  \
      "leave out the reports that vramguard's own rules name: library kernels shown on a "  \
      "GPU to be given a pointer they never use (README, What you see); 0 shows them")      \
    X(error_exitcode, INT, "0", "0..255",                                                   \
      "exit status of a process in which errors were found (0: leave it)")                  \
    X(halt_on_error, BOOL, "0", "",                                                         \
      "stop the process after the first error report (not leaks, not out-of-memory): the "   \
      "JSON and the summary are written, then abort() (a debugger or core dump shows the "   \
      "host there), or exit with error_exitcode when it is set")                            \
    X(leaks, ENUM, "auto", "auto|on|off",                                                   \
      "report allocations still live at exit (auto: in guard mode, less what a caching "    \
      "allocator such as PyTorch's holds: one line says how much)")                         \
    X(growth_steps, INT, "5", "0..1000000",                                                 \
      "report a site whose live bytes grew at each of this many vg_step() calls (0: off)")   \
    X(pinned_limit, SIZE, "0", "",                                                          \
      "vramguard run: cap on pinned host memory (cuMemHostAlloc, cuMemHostRegister, ...): "  \
      "a request that would pass it fails with CUDA_ERROR_OUT_OF_MEMORY, explained, as on a " \
      "smaller host (0 = none)")                                                             \
    X(pinned_warn, SHARE, "50%", "",                                                        \
      "vramguard run: warn once pinned host memory passes this size (64G) or share of the "  \
      "host's RAM (50%): pinned pages cannot be swapped out (0 = never)")

/* Memcheck is guard mode and more: `mode >= VG_MODE_GUARD` means guard mode's checks. */
typedef enum { VG_MODE_FAST = 0, VG_MODE_GUARD = 1, VG_MODE_MEMCHECK = 2 } vg_mode_t;
typedef enum { VG_VMM_AUTO = 0, VG_VMM_ON = 1, VG_VMM_OFF = 2 } vg_vmm_t;
typedef enum { VG_UNWIND_FP = 0, VG_UNWIND_FULL = 1 } vg_unwind_t;
typedef enum { VG_PLAN_OFF = 0, VG_PLAN_LEARN = 1, VG_PLAN_ON = 2 } vg_plan_mode_t;
typedef enum { VG_LEAKS_AUTO = 0, VG_LEAKS_ON = 1, VG_LEAKS_OFF = 2 } vg_leaks_t;
typedef enum { VG_DEFER_AUTO = 0, VG_DEFER_ON = 1, VG_DEFER_OFF = 2 } vg_guard_defer_t;
typedef enum { VG_RACE_AUTO = 0, VG_RACE_ON = 1, VG_RACE_OFF = 2 } vg_host_race_t;
typedef enum { VG_RACE_WAIT = 0, VG_RACE_ABORT = 1 } vg_host_race_action_t;
typedef enum { VG_ORDER_AUTO = 0, VG_ORDER_ON = 1, VG_ORDER_OFF = 2 } vg_free_order_t;

typedef struct vg_limit {
    uint64_t bytes;  /* absolute cap, or 0 */
    double fraction; /* fraction of the device's total memory (SHARE: of the host's), or 0 */
} vg_limit_t;

#define VG_OPT_STR_MAX 1024

#define VG_OPT_CTYPE_STR char
#define VG_OPT_CTYPE_PATH char
#define VG_OPT_CTYPE_BOOL bool
#define VG_OPT_CTYPE_SIZE uint64_t
#define VG_OPT_CTYPE_INT long
#define VG_OPT_CTYPE_ENUM int
#define VG_OPT_CTYPE_LIMIT vg_limit_t
#define VG_OPT_CTYPE_LIST char
#define VG_OPT_CTYPE_SHARE vg_limit_t
#define VG_OPT_DIM_STR [VG_OPT_STR_MAX]
#define VG_OPT_DIM_PATH [VG_OPT_STR_MAX]
#define VG_OPT_DIM_LIST [VG_OPT_STR_MAX]
#define VG_OPT_DIM_BOOL
#define VG_OPT_DIM_SIZE
#define VG_OPT_DIM_INT
#define VG_OPT_DIM_ENUM
#define VG_OPT_DIM_LIMIT
#define VG_OPT_DIM_SHARE

typedef struct vg_options {
#define VG_X(key, type, def, allowed, help) VG_OPT_CTYPE_##type key VG_OPT_DIM_##type;
    VG_OPTIONS(VG_X)
#undef VG_X
} vg_options_t;

typedef enum {
    VG_SRC_DEFAULT = 0,
    VG_SRC_ENV = 1,
    VG_SRC_INIT = 2,
    VG_SRC_CLI = 3
} vg_opt_source_t;

/* The options in force. Written only during initialisation (under the init lock), read
 * freely afterwards. */
extern vg_options_t vg__opt;

/* Reset to defaults, then apply VRAMGUARD_OPTIONS. */
vg_status_t vg__options_load_env(void);
/* Apply a string over the current values, tagging each key with `src`. On error nothing
 * is applied and vg_last_error() names the key and value. */
vg_status_t vg__options_apply(const char *str, vg_opt_source_t src);
/* Check a string without applying it: every key and value, and each PATH it names (its
 * folder exists and is writable, and it is not a folder); *out gets the options it sets
 * over the defaults. On error vg_last_error() names the key and the value. (What the
 * options name beyond that, the suppressions file, is checked above: vg__options_check
 * in api/init.h.) */
vg_status_t vg__options_check(const char *str, vg_options_t *out);
/* The options a string gives over the defaults (the environment is not read): into *out.
 * On error *out is unspecified and vg_last_error() names the key and value. */
vg_status_t vg__options_parse(const char *str, vg_options_t *out);
/* Parse a size with suffix ("15G"). Returns false on garbage or overflow. */
bool vg__parse_size(const char *s, uint64_t *out);
/* The option table for help texts: count, and the i-th key/type/default/allowed/help. */
int vg__options_count(void);
void vg__option_info(int i, const char **key, const char **type, const char **def,
                     const char **allowed, const char **help);
/* Format option i's current value. */
const char *vg__option_value(int i, char *out, size_t n);

/* Every option, its value and where it came from, a line each ("options (N):" first). */
void vg__options_describe(vg_buf_t *b);

#endif /* VG_OPTIONS_H */
