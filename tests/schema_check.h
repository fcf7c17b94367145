/* schema_check.h — validate a JSON document against a JSON Schema (the subset the
 * documented formats use: type, const, enum, required, properties, items, minimum). */
#ifndef VG_TEST_SCHEMA_CHECK_H
#define VG_TEST_SCHEMA_CHECK_H

#include <stdbool.h>
#include <stddef.h>

#include "../src/cli/json.h"

/* True if doc matches schema; otherwise false with the first problem ("devices[0]
 * .events[3].size: expected integer, got string") in err. */
bool schema_check(const json_t *schema, const json_t *doc, char *err, size_t errlen);

#endif
