/* suppress.c — suppression rules (see suppress.h).
 *
 * Rules are read once, at initialisation, into a fixed table; afterwards they only count
 * their hits (atomically: reports come from any thread). Matching is a plain wildcard
 * match, no regular expressions: `*` any run of characters, `?` any one character, and
 * the pattern may match anywhere in the text.
 */
#include "suppress.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define MAX_RULES 256
#define PATTERN_MAX 240

typedef struct rule {
    int kind; /* a vg_report_kind_t, or -1: any kind */
    char pattern[PATTERN_MAX];
    _Atomic uint64_t hits;
} rule_t;

static rule_t g_rules[MAX_RULES];
static int g_nrules;
static char g_path[1024];

/* Does pattern p match a prefix of text t (`*` and `?` wildcards)? Iterative, with one
 * backtracking point: linear in practice, quadratic at worst. */
static bool match_here(const char *p, const char *t) {
    const char *star = NULL, *resume = NULL;
    while (*t) {
        if (!*p)
            return true;
        if (*p == '*') {
            star = p++;
            resume = t;
        } else if (*p == '?' || *p == *t) {
            p++;
            t++;
        } else if (star) {
            p = star + 1;
            t = ++resume;
        } else {
            return false;
        }
    }
    while (*p == '*')
        p++;
    return *p == '\0';
}

/* Anywhere in t: the pattern with an implicit `*` at both ends. */
static bool match(const char *p, const char *t) {
    for (const char *s = t;; s++) {
        if (match_here(p, s))
            return true;
        if (!*s)
            return false;
    }
}

static void trim(char **s) {
    while (**s == ' ' || **s == '\t')
        (*s)++;
    char *e = *s + strlen(*s);
    while (e > *s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n'))
        *--e = '\0';
}

static int kind_of(const char *name) {
    if (strcmp(name, "*") == 0)
        return -1;
    for (int k = 0; k < VG_REPORT_NKINDS; k++)
        if (strcmp(name, vg__report_kind_json((vg_report_kind_t)k)) == 0)
            return k;
    return -2;
}

/* Parse `path` into rules[] (NULL: only check). Returns the status; *count the rules. */
static vg_status_t parse(const char *path, rule_t *rules, int *count) {
    FILE *f = fopen(path, "r");
    if (!f)
        return vg__error(VG_ERR_INVALID_OPTION, "option suppressions=%s: cannot read it: %s",
                         path, strerror(errno));
    char line[1024];
    int n = 0, lineno = 0;
    vg_status_t st = VG_OK;
    while (st == VG_OK && fgets(line, sizeof line, f)) {
        lineno++;
        if (!strchr(line, '\n') && !feof(f)) {
            st = vg__error(VG_ERR_INVALID_OPTION, "option suppressions=%s: line %d is longer "
                           "than %zu characters", path, lineno, sizeof line - 2);
            break;
        }
        char *s = line, *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        trim(&s);
        if (!*s)
            continue;
        char *colon = strchr(s, ':');
        if (!colon) {
            st = vg__error(VG_ERR_INVALID_OPTION, "option suppressions=%s: line %d: '%s' is "
                           "not KIND:PATTERN (e.g. leak:libfoo.so, unordered_free:nccl*)",
                           path, lineno, s);
            break;
        }
        *colon = '\0';
        char *kind = s, *pattern = colon + 1;
        trim(&kind);
        trim(&pattern);
        int k = kind_of(kind);
        if (k == -2) {
            char list[512] = "";
            for (int i = 0; i < VG_REPORT_NKINDS; i++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                         vg__report_kind_json((vg_report_kind_t)i));
            st = vg__error(VG_ERR_INVALID_OPTION, "option suppressions=%s: line %d: unknown "
                           "report kind '%s' (kinds: %s, or * for all)", path, lineno, kind, list);
        } else if (!*pattern || strspn(pattern, "*") == strlen(pattern)) {
            st = vg__error(VG_ERR_INVALID_OPTION, "option suppressions=%s: line %d: the pattern "
                           "after '%s:' would match every report; name a function, file, "
                           "library or kernel", path, lineno, kind);
        } else if (strlen(pattern) >= PATTERN_MAX) {
            st = vg__error(VG_ERR_INVALID_OPTION, "option suppressions=%s: line %d: the pattern "
                           "is longer than %d characters", path, lineno, PATTERN_MAX - 1);
        } else if (n == MAX_RULES) {
            st = vg__error(VG_ERR_INVALID_OPTION, "option suppressions=%s: more than %d rules",
                           path, MAX_RULES);
        } else {
            if (rules) {
                rules[n].kind = k;
                snprintf(rules[n].pattern, sizeof rules[n].pattern, "%s", pattern);
                atomic_store(&rules[n].hits, 0);
            }
            n++;
        }
    }
    if (st == VG_OK && ferror(f))
        st = vg__error(VG_ERR_INVALID_OPTION, "option suppressions=%s: cannot read it: %s",
                       path, strerror(errno));
    fclose(f);
    *count = n;
    return st;
}

vg_status_t vg__suppressions_check(const char *path) {
    int n;
    return path && *path ? parse(path, NULL, &n) : VG_OK;
}

vg_status_t vg__suppressions_load(const char *path) {
    g_nrules = 0;
    if (!path || !*path)
        return VG_OK;
    int n = 0;
    vg_status_t st = parse(path, g_rules, &n);
    if (st != VG_OK)
        return st;
    snprintf(g_path, sizeof g_path, "%s", path);
    g_nrules = n;
    return VG_OK;
}

bool vg__suppressions_any(void) { return g_nrules > 0; }

bool vg__suppressed(vg_report_kind_t kind, const char *const *texts, size_t n) {
    for (int r = 0; r < g_nrules; r++) {
        if (g_rules[r].kind != -1 && g_rules[r].kind != (int)kind)
            continue;
        for (size_t i = 0; i < n; i++) {
            if (texts[i] && match(g_rules[r].pattern, texts[i])) {
                atomic_fetch_add(&g_rules[r].hits, 1);
                return true;
            }
        }
    }
    return false;
}

void vg__suppressions_summary(char *out, size_t n) {
    uint64_t total = 0;
    for (int r = 0; r < g_nrules; r++)
        total += atomic_load(&g_rules[r].hits);
    out[0] = '\0';
    if (!total)
        return;
    size_t used = (size_t)snprintf(out, n, "%llu report%s suppressed (suppressions=%s):",
                                   (unsigned long long)total, total == 1 ? "" : "s", g_path);
    const char *sep = " ";
    for (int r = 0; r < g_nrules && used < n; r++) {
        uint64_t h = atomic_load(&g_rules[r].hits);
        if (!h)
            continue;
        int k = g_rules[r].kind;
        used += (size_t)snprintf(out + used, n - used, "%s%llu %s:%s", sep,
                                 (unsigned long long)h,
                                 k < 0 ? "*" : vg__report_kind_json((vg_report_kind_t)k),
                                 g_rules[r].pattern);
        sep = ", ";
    }
}
