/* options.c — parsing VRAMGUARD_OPTIONS / vg_init strings into vg__opt.
 *
 * The table is VG_OPTIONS in options.h. A string is parsed into a copy of the current
 * options and committed only if every key and value is valid, so a bad string changes
 * nothing. No allocation: the string is copied into a bounded stack buffer.
 */
#define _GNU_SOURCE
#include "options.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "util/parse_size.h"

vg_options_t vg__opt;
static vg_opt_source_t g_source[64];

enum { VG_T_STR, VG_T_LIST, VG_T_PATH, VG_T_BOOL, VG_T_SIZE, VG_T_INT, VG_T_ENUM, VG_T_LIMIT,
       VG_T_SHARE };

typedef struct opt_desc {
    const char *key, *type_name, *def, *allowed, *help;
    int type;
    size_t offset;
} opt_desc_t;

static const opt_desc_t g_desc[] = {
#define VG_X(key, type, def, allowed, help)                                                 \
    {#key, #type, def, allowed, help, VG_T_##type, offsetof(vg_options_t, key)},
    VG_OPTIONS(VG_X)
#undef VG_X
};
#define N_OPTS ((int)VG_ARRAY_LEN(g_desc))
_Static_assert(VG_ARRAY_LEN(g_desc) <= 64, "g_source is too small");

static const char *source_name(vg_opt_source_t s) {
    switch (s) {
    case VG_SRC_ENV: return "VRAMGUARD_OPTIONS";
    case VG_SRC_INIT: return "vg_init";
    case VG_SRC_CLI: return "command line";
    default: return "default";
    }
}

/* ---------------------------------------------------------------------------------------
 * Value parsers
 * ------------------------------------------------------------------------------------- */

bool vg__parse_size(const char *s, uint64_t *out) { return vg_util_parse_size(s, out) == 0; }

static bool parse_bool(const char *s, bool *out) {
    static const char *yes[] = {"1", "true", "yes", "on"};
    static const char *no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = true;
            return true;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = false;
            return true;
        }
    }
    return false;
}

static bool parse_int(const char *s, const char *range, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0')
        return false;
    long lo = 0, hi = 0;
    if (range[0] && sscanf(range, "%ld..%ld", &lo, &hi) == 2 && (v < lo || v > hi))
        return false;
    *out = v;
    return true;
}

static bool parse_enum(const char *s, const char *allowed, int *out) {
    size_t n = strlen(s);
    int idx = 0;
    for (const char *p = allowed; *p; idx++) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncasecmp(p, s, n) == 0) {
            *out = idx;
            return true;
        }
        p += len + (bar ? 1 : 0);
    }
    return false;
}

static bool parse_limit(const char *s, vg_limit_t *out) {
    size_t n = strlen(s);
    if (strchr(s, '.') && n && (isdigit((unsigned char)s[n - 1]) || s[n - 1] == '.')) {
        /* a fraction, 0.2 or 1.; not a size, 17.5G */
        char *end;
        errno = 0;
        double f = strtod(s, &end);
        if (errno || *end != '\0' || !(f > 0.0 && f <= 1.0) || isnan(f))
            return false;
        out->bytes = 0;
        out->fraction = f;
        return true;
    }
    uint64_t b;
    if (!vg__parse_size(s, &b))
        return false;
    out->bytes = b;
    out->fraction = 0;
    return true;
}

/* "50%": a share of the host's RAM in (0, 100]; else a size. */
static bool parse_share(const char *s, vg_limit_t *out) {
    size_t n = strlen(s);
    if (n > 1 && s[n - 1] == '%') {
        char *end;
        errno = 0;
        double p = strtod(s, &end);
        if (errno || end != s + n - 1 || !(p > 0.0 && p <= 100.0) || isnan(p))
            return false;
        out->bytes = 0;
        out->fraction = p / 100.0;
        return true;
    }
    out->fraction = 0;
    return vg__parse_size(s, &out->bytes);
}

static const char *type_expectation(const opt_desc_t *d, char *buf, size_t n) {
    switch (d->type) {
    case VG_T_BOOL: return "expected 1/0, true/false, yes/no or on/off";
    case VG_T_SIZE:
        if (d->allowed[0]) {
            snprintf(buf, n, "expected a size in %s (K, M, G, T suffixes)", d->allowed);
            return buf;
        }
        return "expected a size such as 512, 64K, 16M or 15G";
    case VG_T_INT: snprintf(buf, n, "expected a whole number in %s", d->allowed); return buf;
    case VG_T_ENUM: snprintf(buf, n, "expected one of %s", d->allowed); return buf;
    case VG_T_LIMIT:
        return "expected a size such as 15G, or a fraction of the device such as 0.2";
    case VG_T_SHARE:
        return "expected a size such as 64G, or a percentage of the host's RAM such as 50%";
    default: return "expected text";
    }
}

static bool parse_value(const opt_desc_t *d, const char *val, vg_options_t *o) {
    void *field = (char *)o + d->offset;
    switch (d->type) {
    case VG_T_STR:
    case VG_T_LIST:
    case VG_T_PATH:
        if (strlen(val) >= VG_OPT_STR_MAX)
            return false;
        strcpy((char *)field, val);
        return true;
    case VG_T_BOOL: return parse_bool(val, (bool *)field);
    case VG_T_SIZE: {
        uint64_t v, lo, hi;
        if (!vg__parse_size(val, &v))
            return false;
        const char *dots = strstr(d->allowed, "..");
        if (dots) { /* "16..1M" */
            char los[32];
            snprintf(los, sizeof los, "%.*s", (int)(dots - d->allowed), d->allowed);
            if (vg__parse_size(los, &lo) && vg__parse_size(dots + 2, &hi) && (v < lo || v > hi))
                return false;
        }
        *(uint64_t *)field = v;
        return true;
    }
    case VG_T_INT: return parse_int(val, d->allowed, (long *)field);
    case VG_T_ENUM: return parse_enum(val, d->allowed, (int *)field);
    case VG_T_LIMIT: return parse_limit(val, (vg_limit_t *)field);
    case VG_T_SHARE: return parse_share(val, (vg_limit_t *)field);
    default: return false;
    }
}

static const opt_desc_t *find_key(const char *key, int *index) {
    for (int i = 0; i < N_OPTS; i++) {
        if (strcmp(g_desc[i].key, key) == 0) {
            *index = i;
            return &g_desc[i];
        }
    }
    return NULL;
}

static char *trim(char *s) {
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

/* Parse `str` into *o / src[]; on error set the last error and return it. */
static vg_status_t parse_into(const char *str, vg_opt_source_t tag, vg_options_t *o,
                              vg_opt_source_t *src) {
    char buf[8192], list[8192];
    if (strlen(str) >= sizeof buf)
        return vg__error(VG_ERR_INVALID_OPTION, "options string is longer than %zu bytes",
                         sizeof buf - 1);
    strcpy(buf, str);
    char *save = NULL;
    const opt_desc_t *open_list = NULL; /* the LIST option the last key=value set */
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        item = trim(item);
        if (*item == '\0')
            continue;
        char *eq = strchr(item, '=');
        if (!eq && open_list) { /* the list's next item (lengths: both within buf) */
            size_t n = strlen(list);
            snprintf(list + n, sizeof list - n, ",%s", item);
            if (!parse_value(open_list, list, o))
                return vg__error(VG_ERR_INVALID_OPTION, "bad value '%s' for option '%s'", list,
                                 open_list->key);
            continue;
        }
        if (!eq)
            return vg__error(VG_ERR_INVALID_OPTION,
                             "option '%s' has no value (write key=value, e.g. mode=guard)",
                             item);
        *eq = '\0';
        char *key = trim(item), *val = trim(eq + 1);
        int idx;
        const opt_desc_t *d = find_key(key, &idx);
        if (!d)
            return vg__error(VG_ERR_INVALID_OPTION,
                             "unknown option '%s' (run 'vramguard help options' for the list)",
                             key);
        if (!parse_value(d, val, o)) {
            char tmp[160];
            return vg__error(VG_ERR_INVALID_OPTION, "bad value '%s' for option '%s': %s", val,
                             key, type_expectation(d, tmp, sizeof tmp));
        }
        src[idx] = tag;
        open_list = d->type == VG_T_LIST ? d : NULL;
        if (open_list)
            snprintf(list, sizeof list, "%s", val);
    }
    return VG_OK;
}

static void set_defaults_into(vg_options_t *o) {
    for (int i = 0; i < N_OPTS; i++) {
        bool ok = parse_value(&g_desc[i], g_desc[i].def, o);
        (void)ok; /* defaults are compile-time constants, checked by the options test */
    }
}

static void set_defaults(void) {
    set_defaults_into(&vg__opt);
    for (int i = 0; i < N_OPTS; i++)
        g_source[i] = VG_SRC_DEFAULT;
}

vg_status_t vg__options_load_env(void) {
    set_defaults();
    const char *env = secure_getenv("VRAMGUARD_OPTIONS");
    if (!env || !*env)
        return VG_OK;
    vg_status_t st = vg__options_apply(env, VG_SRC_ENV);
    if (st != VG_OK)
        vg__error_append(" (in VRAMGUARD_OPTIONS)");
    return st;
}

vg_status_t vg__options_apply(const char *str, vg_opt_source_t tag) {
    if (!str)
        return VG_OK;
    vg_options_t tmp = vg__opt;
    vg_opt_source_t src[64];
    memcpy(src, g_source, sizeof src);
    vg_status_t st = parse_into(str, tag, &tmp, src);
    if (st != VG_OK)
        return st;
    vg__opt = tmp;
    memcpy(g_source, src, sizeof src);
    return VG_OK;
}

/* An output file named by option d can be created: "" (none) or a path whose folder
 * exists and is writable, and which is not itself a folder. Special files (/dev/null, a
 * FIFO) are written into as they are (files.c). */
static vg_status_t check_output_path(const opt_desc_t *d, const char *pattern) {
    char path[VG_OPT_STR_MAX + 64], dir[VG_OPT_STR_MAX + 64];
    if (!*pattern)
        return VG_OK;
    if (!vg__expand_path(pattern, path, sizeof path))
        return vg__error(VG_ERR_INVALID_OPTION, "option %s=%s: the path is too long", d->key,
                         pattern);
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return vg__error(VG_ERR_INVALID_OPTION, "option %s=%s: that is a folder, not a file",
                         d->key, pattern);
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        strcpy(dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return vg__error(VG_ERR_INVALID_OPTION,
                         "option %s=%s: cannot create the file: the folder '%s' does not exist",
                         d->key, pattern, dir);
    if (access(dir, W_OK | X_OK) != 0 && !(stat(path, &st) == 0 && access(path, W_OK) == 0))
        return vg__error(VG_ERR_INVALID_OPTION,
                         "option %s=%s: cannot create the file: the folder '%s' is not writable",
                         d->key, pattern, dir);
    return VG_OK;
}

vg_status_t vg__options_parse(const char *str, vg_options_t *out) {
    set_defaults_into(out);
    vg_opt_source_t src[64];
    return str ? parse_into(str, VG_SRC_CLI, out, src) : VG_OK;
}

vg_status_t vg__options_check(const char *str, vg_options_t *out) {
    set_defaults_into(out);
    vg_opt_source_t src[64];
    memset(src, 0, sizeof src);
    vg_status_t st = parse_into(str, VG_SRC_CLI, out, src);
    for (int i = 0; st == VG_OK && i < N_OPTS; i++)
        if (g_desc[i].type == VG_T_PATH && src[i] == VG_SRC_CLI)
            st = check_output_path(&g_desc[i], (const char *)out + g_desc[i].offset);
    return st;
}

int vg__options_count(void) { return N_OPTS; }

void vg__option_info(int i, const char **key, const char **type, const char **def,
                     const char **allowed, const char **help) {
    *key = g_desc[i].key;
    *type = g_desc[i].type_name;
    *def = g_desc[i].def;
    *allowed = g_desc[i].allowed;
    *help = g_desc[i].help;
}

const char *vg__option_value(int i, char *out, size_t n) {
    const opt_desc_t *d = &g_desc[i];
    const void *field = (const char *)&vg__opt + d->offset;
    switch (d->type) {
    case VG_T_STR:
    case VG_T_LIST:
    case VG_T_PATH: snprintf(out, n, "%s", (const char *)field); break;
    case VG_T_BOOL: snprintf(out, n, "%d", *(const bool *)field ? 1 : 0); break;
    case VG_T_SIZE: snprintf(out, n, "%llu", (unsigned long long)*(const uint64_t *)field); break;
    case VG_T_INT: snprintf(out, n, "%ld", *(const long *)field); break;
    case VG_T_ENUM: {
        int want = *(const int *)field, idx = 0;
        const char *p = d->allowed;
        out[0] = '\0';
        while (*p) {
            const char *bar = strchr(p, '|');
            size_t len = bar ? (size_t)(bar - p) : strlen(p);
            if (idx++ == want) {
                snprintf(out, n, "%.*s", (int)len, p);
                break;
            }
            p += len + (bar ? 1 : 0);
        }
        break;
    }
    case VG_T_LIMIT:
    case VG_T_SHARE: {
        const vg_limit_t *l = field;
        if (l->fraction > 0 && d->type == VG_T_SHARE)
            snprintf(out, n, "%g%%", l->fraction * 100.0);
        else if (l->fraction > 0)
            snprintf(out, n, "%g", l->fraction);
        else
            snprintf(out, n, "%llu", (unsigned long long)l->bytes);
        break;
    }
    }
    return out;
}

void vg__options_describe(vg_buf_t *b) {
    char val[VG_OPT_STR_MAX + 8];
    int width = 0; /* the longest key, so that the values line up */
    for (int i = 0; i < N_OPTS; i++)
        if ((int)strlen(g_desc[i].key) > width)
            width = (int)strlen(g_desc[i].key);
    vg__buf_printf(b, "options (%d):\n", N_OPTS);
    for (int i = 0; i < N_OPTS; i++) {
        vg__option_value(i, val, sizeof val);
        vg__buf_printf(b, "  %-*s = %-16s (%s)\n", width, g_desc[i].key, val[0] ? val : "\"\"",
                       source_name(g_source[i]));
    }
}

VG_API const char *vg_option(const char *key) {
    int idx;
    if (!key || !find_key(key, &idx))
        return NULL;
    return vg__option_value(idx, vg__tbuf()->option, sizeof vg__tbuf()->option);
}
