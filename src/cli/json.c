/* json.c — the JSON reader (see json.h): recursive descent over the text, nodes and
 * strings from one arena freed at once. */
#define _GNU_SOURCE
#include "json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64

typedef struct chunk {
    struct chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} chunk_t;

struct json_doc {
    chunk_t *chunks;
    json_t *root;
};

typedef struct parser {
    const char *p, *start, *end;
    json_doc_t *doc;
    char *err;
    size_t errlen;
    bool failed;
} parser_t;

static void *arena(parser_t *ps, size_t n) {
    n = (n + 15) & ~(size_t)15;
    chunk_t *c = ps->doc->chunks;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > (1u << 20) ? n : (1u << 20);
        c = malloc(sizeof *c + cap);
        if (!c)
            return NULL;
        c->next = ps->doc->chunks;
        c->used = 0;
        c->cap = cap;
        ps->doc->chunks = c;
    }
    void *r = c->data + c->used;
    c->used += n;
    return r;
}

static void fail(parser_t *ps, const char *fmt, ...) {
    if (ps->failed)
        return;
    ps->failed = true;
    int line = 1, col = 1;
    for (const char *q = ps->start; q < ps->p && q < ps->end; q++) {
        if (*q == '\n')
            line++, col = 1;
        else
            col++;
    }
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (ps->p >= ps->end)
        snprintf(ps->err, ps->errlen, "line %d, column %d: %s, but the file ends there (is it "
                                      "truncated?)", line, col, what);
    else
        snprintf(ps->err, ps->errlen, "line %d, column %d: %s", line, col, what);
}

static void skip_ws(parser_t *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static json_t *node(parser_t *ps, json_type_t t) {
    json_t *j = arena(ps, sizeof *j);
    if (!j) {
        fail(ps, "out of memory");
        return NULL;
    }
    memset(j, 0, sizeof *j);
    j->type = t;
    return j;
}

static int hex4(const char *s) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= c - '0';
        else if (c >= 'a' && c <= 'f')
            v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            v |= c - 'A' + 10;
        else
            return -1;
    }
    return v;
}

static size_t utf8(char *out, unsigned cp) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* At the opening quote: the unescaped string, in the arena. */
static const char *string(parser_t *ps) {
    const char *q = ++ps->p; /* past the quote: find the end to size the copy */
    while (q < ps->end && *q != '"')
        q += (*q == '\\' && q + 1 < ps->end) ? 2 : 1;
    if (q >= ps->end) {
        ps->p = ps->end;
        fail(ps, "a string is not closed");
        return NULL;
    }
    char *out = arena(ps, (size_t)(q - ps->p) + 1), *o = out;
    if (!out) {
        fail(ps, "out of memory");
        return NULL;
    }
    while (ps->p < q) {
        unsigned char c = (unsigned char)*ps->p;
        if (c < 0x20) {
            fail(ps, "a control character inside a string");
            return NULL;
        }
        if (c != '\\') {
            *o++ = (char)c;
            ps->p++;
            continue;
        }
        char e = ps->p[1];
        ps->p += 2;
        switch (e) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '/': *o++ = '/'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            int v = q - ps->p >= 4 ? hex4(ps->p) : -1;
            if (v < 0) {
                fail(ps, "a bad \\u escape");
                return NULL;
            }
            ps->p += 4;
            unsigned cp = (unsigned)v;
            if (cp >= 0xD800 && cp < 0xDC00 && q - ps->p >= 6 && ps->p[0] == '\\' &&
                ps->p[1] == 'u') {
                int lo = hex4(ps->p + 2);
                if (lo >= 0xDC00 && lo < 0xE000) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (unsigned)(lo - 0xDC00);
                    ps->p += 6;
                }
            }
            o += utf8(o, cp); /* (6 escaped bytes always cover up to 4 written ones) */
            break;
        }
        default:
            ps->p--;
            fail(ps, "a bad escape '\\%c' in a string", e);
            return NULL;
        }
    }
    *o = '\0';
    ps->p = q + 1;
    return out;
}

static json_t *value(parser_t *ps, int depth);

/* Children collected in a growing heap array, then copied into the arena. */
typedef struct kids {
    json_t **v;
    const char **k;
    size_t n, cap;
} kids_t;

static bool kids_push(kids_t *k, const char *key, json_t *v) {
    if (k->n == k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 8;
        json_t **nv = realloc(k->v, cap * sizeof *nv);
        if (!nv)
            return false;
        k->v = nv;
        const char **nk = realloc(k->k, cap * sizeof *nk);
        if (!nk)
            return false;
        k->k = nk;
        k->cap = cap;
    }
    k->v[k->n] = v;
    k->k[k->n] = key;
    k->n++;
    return true;
}

static json_t *container(parser_t *ps, int depth, bool obj) {
    char close = obj ? '}' : ']';
    ps->p++;
    json_t *j = node(ps, obj ? J_OBJ : J_ARR);
    kids_t k = {0};
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        return j;
    }
    while (j && !ps->failed) {
        skip_ws(ps);
        const char *key = NULL;
        if (obj) {
            if (ps->p >= ps->end || *ps->p != '"') {
                fail(ps, "expected a key in quotes");
                break;
            }
            if (!(key = string(ps)))
                break;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                fail(ps, "expected ':' after the key \"%.40s\"", key);
                break;
            }
            ps->p++;
        }
        json_t *v = value(ps, depth + 1);
        if (!v)
            break;
        if (!kids_push(&k, key, v)) {
            fail(ps, "out of memory");
            break;
        }
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            break;
        }
        fail(ps, "expected ',' or '%c'", close);
    }
    if (!ps->failed && j) {
        j->n = k.n;
        j->kids = arena(ps, k.n * sizeof *j->kids);
        j->keys = obj ? arena(ps, k.n * sizeof *j->keys) : NULL;
        if (!j->kids || (obj && !j->keys))
            fail(ps, "out of memory");
        else {
            memcpy(j->kids, k.v, k.n * sizeof *j->kids);
            if (obj)
                memcpy(j->keys, k.k, k.n * sizeof *j->keys);
        }
    }
    free(k.v);
    free(k.k);
    return ps->failed ? NULL : j;
}

static json_t *number(parser_t *ps) {
    const char *s = ps->p;
    if (ps->p < ps->end && *ps->p == '-')
        ps->p++;
    bool digits = false, integral = true;
    while (ps->p < ps->end && ((*ps->p >= '0' && *ps->p <= '9') || *ps->p == '.' ||
                               *ps->p == 'e' || *ps->p == 'E' || *ps->p == '+' || *ps->p == '-')) {
        if (*ps->p >= '0' && *ps->p <= '9')
            digits = true;
        else
            integral = false;
        ps->p++;
    }
    char buf[64];
    size_t n = (size_t)(ps->p - s);
    if (!digits || n >= sizeof buf) {
        ps->p = s;
        fail(ps, "expected a value");
        return NULL;
    }
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *endp;
    json_t *j = node(ps, J_NUM);
    if (!j)
        return NULL;
    j->num = strtod(buf, &endp);
    if (*endp || !isfinite(j->num)) {
        ps->p = s;
        fail(ps, "a malformed number '%s'", buf);
        return NULL;
    }
    if (integral)
        j->i = strtoll(buf, NULL, 10); /* (saturates at the int64 limits) */
    else if (j->num >= -9.2e18 && j->num <= 9.2e18)
        j->i = (int64_t)j->num;
    else
        j->i = j->num > 0 ? INT64_MAX : INT64_MIN;
    return j;
}

static json_t *value(parser_t *ps, int depth) {
    skip_ws(ps);
    if (depth > MAX_DEPTH) {
        fail(ps, "nested more than %d levels deep", MAX_DEPTH);
        return NULL;
    }
    if (ps->p >= ps->end) {
        fail(ps, "expected a value");
        return NULL;
    }
    switch (*ps->p) {
    case '{': return container(ps, depth, true);
    case '[': return container(ps, depth, false);
    case '"': {
        json_t *j = node(ps, J_STR);
        if (j && !(j->str = string(ps)))
            return NULL;
        return j;
    }
    case 't':
    case 'f':
    case 'n': {
        static const char *const words[] = {"true", "false", "null"};
        for (int i = 0; i < 3; i++) {
            size_t l = strlen(words[i]);
            if ((size_t)(ps->end - ps->p) >= l && memcmp(ps->p, words[i], l) == 0) {
                ps->p += l;
                json_t *j = node(ps, i == 2 ? J_NULL : J_BOOL);
                if (j)
                    j->b = i == 0;
                return j;
            }
        }
        fail(ps, "expected a value");
        return NULL;
    }
    default: return number(ps);
    }
}

json_doc_t *json_parse(const char *text, size_t len, char *err, size_t errlen) {
    json_doc_t *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    parser_t ps = {.p = text, .start = text, .end = text + len, .doc = d, .err = err,
                   .errlen = errlen};
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)
        ps.p += 3; /* a UTF-8 byte order mark */
    d->root = value(&ps, 0);
    skip_ws(&ps);
    if (!ps.failed && ps.p < ps.end)
        fail(&ps, "unexpected text after the end of the document");
    if (ps.failed || !d->root) {
        json_free(d);
        return NULL;
    }
    return d;
}

json_t *json_root(json_doc_t *d) { return d ? d->root : NULL; }

void json_free(json_doc_t *d) {
    if (!d)
        return;
    for (chunk_t *c = d->chunks, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    free(d);
}

json_t *json_get(const json_t *obj, const char *key) {
    if (!obj || obj->type != J_OBJ)
        return NULL;
    for (size_t i = 0; i < obj->n; i++)
        if (strcmp(obj->keys[i], key) == 0)
            return obj->kids[i];
    return NULL;
}

int64_t json_int(const json_t *obj, const char *key, int64_t fallback) {
    json_t *v = json_get(obj, key);
    return v && v->type == J_NUM ? v->i : fallback;
}

const char *json_str(const json_t *obj, const char *key, const char *fallback) {
    json_t *v = json_get(obj, key);
    return v && v->type == J_STR ? v->str : fallback;
}

uint64_t json_addr(const json_t *obj, const char *key) {
    json_t *v = json_get(obj, key);
    if (!v)
        return 0;
    if (v->type == J_NUM)
        return (uint64_t)v->i;
    return v->type == J_STR ? strtoull(v->str, NULL, 0) : 0;
}
