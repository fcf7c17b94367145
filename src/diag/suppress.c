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
    bool builtin; /* one of vramguard's own rules (below), not the file's */
    _Atomic uint64_t hits;
} rule_t;

/* vramguard's own rules (option default_suppressions, on by default; README, "What you see"):
 * reports of library kernels that a GPU showed to be false. Each names the evidence. */
static const struct {
    vg_report_kind_t kind;
    const char *pattern;
} g_builtin[] = {
    /* cuDNN's implicit-GEMM weight-gradient kernels (ResNet-50's backward pass) are given,
     * in their first parameter, the address of a tensor PyTorch has freed; memcheck mode
     * checked every access of those very launches on an H200 and found none there
     * (docs/gpu-validation.md, 2026-11-26 evening). */
    {VG_REPORT_FREED_ARG, "cutlass__5x_cudnn*Wgrad"},
};

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
                rules[n].builtin = false;
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

vg_status_t vg__suppressions_load(const char *path, bool builtin) {
    g_nrules = 0;
    g_path[0] = '\0';
    int n = 0;
    if (path && *path) {
        vg_status_t st = parse(path, g_rules, &n);
        if (st != VG_OK)
            return st;
        snprintf(g_path, sizeof g_path, "%s", path);
    }
    for (size_t i = 0; builtin && i < sizeof g_builtin / sizeof g_builtin[0] && n < MAX_RULES;
         i++, n++) {
        g_rules[n].kind = (int)g_builtin[i].kind;
        snprintf(g_rules[n].pattern, sizeof g_rules[n].pattern, "%s", g_builtin[i].pattern);
        g_rules[n].builtin = true;
        atomic_store(&g_rules[n].hits, 0);
    }
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
    vg_buf_t b = {0};
    vg__buf_printf(&b, "%llu report%s suppressed", (unsigned long long)total,
                   total == 1 ? "" : "s");
    bool file_hit = false;
    for (int pass = 0; pass < 2; pass++) { /* the file's rules, then vramguard's own */
        const char *sep = NULL;
        for (int r = 0; r < g_nrules; r++) {
            uint64_t h = atomic_load(&g_rules[r].hits);
            if (!h || g_rules[r].builtin != (pass == 1))
                continue;
            if (!sep && pass == 0)
                vg__buf_printf(&b, " (suppressions=%s):", g_path), file_hit = true;
            else if (!sep)
                vg__buf_printf(&b, "%s (vramguard's default rules; default_suppressions=0 "
                               "shows them):", file_hit ? ";" : "");
            int k = g_rules[r].kind;
            vg__buf_printf(&b, "%s%llu %s:%s", sep ? sep : " ", (unsigned long long)h,
                           k < 0 ? "*" : vg__report_kind_json((vg_report_kind_t)k),
                           g_rules[r].pattern);
            sep = ", ";
        }
    }
    snprintf(out, n, "%s", b.data ? b.data : "");
    vg__buf_free(&b);
}
