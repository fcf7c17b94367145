/* json.h — a small JSON reader for the CLI (snapshot files): the whole text parsed into a
 * tree of nodes in one arena, with an error that names the line and column and what was
 * expected. Numbers keep their text's value as a double and, when integral, as int64. */
#ifndef VG_CLI_JSON_H
#define VG_CLI_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } json_type_t;

typedef struct json {
    json_type_t type;
    bool b;
    double num;
    int64_t i;          /* J_NUM, when integral */
    const char *str;    /* J_STR (NUL-terminated, unescaped) */
    size_t n;           /* J_ARR / J_OBJ: number of children */
    struct json **kids; /* J_ARR / J_OBJ: children */
    const char **keys;  /* J_OBJ: the key of each child */
} json_t;

typedef struct json_doc json_doc_t;

/* Parse text[0..len). Returns NULL with a message in err ("line 3, column 7: expected
 * ',' or '}'") on malformed or truncated input. Depth is limited (no stack overflow). */
json_doc_t *json_parse(const char *text, size_t len, char *err, size_t errlen);
json_t *json_root(json_doc_t *d);
void json_free(json_doc_t *d);

/* Lookups that tolerate NULL and wrong types (returning NULL / the fallback). */
json_t *json_get(const json_t *obj, const char *key);
int64_t json_int(const json_t *obj, const char *key, int64_t fallback);
const char *json_str(const json_t *obj, const char *key, const char *fallback);
/* A hex address string ("0x1f00") or number as an integer. */
uint64_t json_addr(const json_t *obj, const char *key);

#endif /* VG_CLI_JSON_H */
