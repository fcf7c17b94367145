/* schema_check.c — see schema_check.h. */
#include "schema_check.h"

#include <stdio.h>
#include <string.h>

static bool type_ok(const char *t, const json_t *v) {
    if (strcmp(t, "integer") == 0)
        return v->type == J_NUM && (double)v->i == v->num;
    if (strcmp(t, "number") == 0)
        return v->type == J_NUM;
    if (strcmp(t, "string") == 0)
        return v->type == J_STR;
    if (strcmp(t, "boolean") == 0)
        return v->type == J_BOOL;
    if (strcmp(t, "object") == 0)
        return v->type == J_OBJ;
    if (strcmp(t, "array") == 0)
        return v->type == J_ARR;
    if (strcmp(t, "null") == 0)
        return v->type == J_NULL;
    return false;
}

static bool same(const json_t *a, const json_t *b) {
    if (a->type != b->type)
        return false;
    if (a->type == J_STR)
        return strcmp(a->str, b->str) == 0;
    if (a->type == J_NUM)
        return a->num == b->num;
    if (a->type == J_BOOL)
        return a->b == b->b;
    return a->type == J_NULL;
}

static bool check(const json_t *s, const json_t *v, const char *path, char *err, size_t n) {
    const char *where = *path ? path : "(the document)";
    const json_t *t = json_get(s, "type");
    if (t && t->type == J_STR && !type_ok(t->str, v)) {
        snprintf(err, n, "%s: expected %s", where, t->str);
        return false;
    }
    const json_t *c = json_get(s, "const");
    if (c && !same(c, v)) {
        snprintf(err, n, "%s: not the constant the schema requires", where);
        return false;
    }
    const json_t *e = json_get(s, "enum");
    if (e && e->type == J_ARR) {
        bool found = false;
        for (size_t i = 0; i < e->n && !found; i++)
            found = same(e->kids[i], v);
        if (!found) {
            snprintf(err, n, "%s: %s is not one of the allowed values", where,
                     v->type == J_STR ? v->str : "the value");
            return false;
        }
    }
    const json_t *m = json_get(s, "minimum");
    if (m && m->type == J_NUM && v->type == J_NUM && v->num < m->num) {
        snprintf(err, n, "%s: %g is below the minimum %g", where, v->num, m->num);
        return false;
    }
    const json_t *req = json_get(s, "required");
    for (size_t i = 0; req && v->type == J_OBJ && i < req->n; i++)
        if (!json_get(v, req->kids[i]->str)) {
            snprintf(err, n, "%s: the required key '%s' is missing", where, req->kids[i]->str);
            return false;
        }
    const json_t *props = json_get(s, "properties");
    for (size_t i = 0; props && v->type == J_OBJ && i < props->n; i++) {
        const json_t *kv = json_get(v, props->keys[i]);
        char p[512];
        snprintf(p, sizeof p, "%s%s%s", path, *path ? "." : "", props->keys[i]);
        if (kv && !check(props->kids[i], kv, p, err, n))
            return false;
    }
    const json_t *items = json_get(s, "items");
    for (size_t i = 0; items && v->type == J_ARR && i < v->n; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s[%zu]", path, i);
        if (!check(items, v->kids[i], p, err, n))
            return false;
    }
    return true;
}

bool schema_check(const json_t *schema, const json_t *doc, char *err, size_t errlen) {
    return check(schema, doc, "", err, errlen);
}
