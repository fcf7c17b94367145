/* suppress.h — reports the user asked not to see (option `suppressions=FILE`).
 *
 * The file holds one rule per line, `KIND:PATTERN`, as LeakSanitizer's and
 * ThreadSanitizer's suppression files do: KIND is a report kind as the JSON names it
 * (`leak`, `unordered_free`, ...) or `*` for every kind; PATTERN is matched, as a
 * substring with `*` and `?` wildcards, against every frame of the report's stacks (the
 * allocation, the free, the offending call, the kernel's launch), the library each C
 * frame lies in, and the kernel's name. `#` starts a comment; blank lines are skipped.
 * A suppressed report is not printed, not counted, not written to report_json and does
 * not change the exit status; the summary at exit says how many each rule suppressed.
 * vramguard adds rules of its own (option default_suppressions; README).
 */
#ifndef VG_SUPPRESS_H
#define VG_SUPPRESS_H

#include <stdbool.h>
#include <stddef.h>

#include "base/common.h"
#include "report.h"

/* Read the rules of `path` (from the `suppressions` option, at initialisation; "" or
 * NULL: none), then, if `builtin` (option default_suppressions), vramguard's own rules:
 * reports of library kernels shown false on a GPU. An unreadable file or a bad line is
 * an error naming the file and the line. */
vg_status_t vg__suppressions_load(const char *path, bool builtin);
/* Check a file without loading it (the CLI, before it starts a program). */
vg_status_t vg__suppressions_check(const char *path);

/* Are there rules? (Reports then gather their texts for vg__suppressed.) */
bool vg__suppressions_any(void);
/* Does a rule for `kind` match any of texts[0..n)? Counts the first rule that does. */
bool vg__suppressed(vg_report_kind_t kind, const char *const *texts, size_t n);
/* "3 reports suppressed (suppressions=FILE): 2 unordered_free:nccl*, 1 leak:libfoo", or
 * "" when none was (at exit). */
void vg__suppressions_summary(char *out, size_t n);

#endif /* VG_SUPPRESS_H */
