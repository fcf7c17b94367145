/* parse_size.h — "15G"-style sizes, shared by the core's options and vgsim's settings.
 * Header-only so that vgsim (which must not link the core) and the core use one parser.
 * Accepts a decimal number with an optional binary suffix K, M, G or T (also KB, KiB,
 * ...), surrounding spaces allowed; with a suffix the number may have a fraction (1.5G,
 * rounded down to a byte). Returns 0 on success, -1 on garbage or overflow. */
#ifndef VG_UTIL_PARSE_SIZE_H
#define VG_UTIL_PARSE_SIZE_H

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

static inline int vg_util_parse_size(const char *s, uint64_t *out) {
    while (isspace((unsigned char)*s))
        s++;
    if (!isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -1;
    unsigned long long num = 0, den = 1; /* the fraction: num / den */
    if (*end == '.') {
        for (end++; isdigit((unsigned char)*end); end++)
            if (den <= UINT64_MAX / 100) { /* (digits past 18 places change nothing) */
                num = num * 10 + (unsigned long long)(*end - '0');
                den *= 10;
            }
        if (den == 1)
            return -1;
    }
    uint64_t mul = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mul = 1ull << 10; end++; break;
    case 'M': mul = 1ull << 20; end++; break;
    case 'G': mul = 1ull << 30; end++; break;
    case 'T': mul = 1ull << 40; end++; break;
    default: break;
    }
    if (mul > 1 && (*end == 'i' || *end == 'I'))
        end++;
    if (*end == 'b' || *end == 'B')
        end++;
    while (isspace((unsigned char)*end))
        end++;
    if (*end != '\0' || v > UINT64_MAX / mul || (den > 1 && mul == 1))
        return -1;
    uint64_t frac = (uint64_t)((unsigned __int128)num * mul / den);
    if ((uint64_t)v * mul > UINT64_MAX - frac)
        return -1;
    *out = (uint64_t)v * mul + frac;
    return 0;
}

#endif /* VG_UTIL_PARSE_SIZE_H */
