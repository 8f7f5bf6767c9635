/*
 * send_columns.c: one Arrow batch's columns read row by row, every read bounds checked against the buffers' sizes,
 * and the Java key hash (send_internal.h: the native sender's overview).
 */
#include "send_internal.h"

static int bit_set(const uint8_t *bits, int64_t size, int64_t i, int *ok) {
    if (bits == NULL) return 1;
    if (i < 0 || i / 8 >= size) {
        *ok = 0;
        return 0;
    }
    return (bits[i / 8] >> (i % 8)) & 1;
}

/* Row `row` of a string column: 1 and (*p, *len) when set, 0 when null; *ok = 0 when a buffer is too small or an
 * offset points outside the data. */
int string_at(const pns_strings_t *c, int64_t row, const uint8_t **p, int64_t *len, int *ok) {
    if (c->offsets == NULL) return 0;
    int64_t i = c->offset + row;
    if (!bit_set(c->valid, c->valid_size, i, ok)) return 0;
    int64_t width = c->wide ? 8 : 4;
    if (i < 0 || (i + 2) * width > c->offsets_size) {
        *ok = 0;
        return 0;
    }
    int64_t start, end;
    if (c->wide) {
        memcpy(&start, c->offsets + i * 8, 8);
        memcpy(&end, c->offsets + (i + 1) * 8, 8);
    } else {
        int32_t s32, e32;
        memcpy(&s32, c->offsets + i * 4, 4);
        memcpy(&e32, c->offsets + (i + 1) * 4, 4);
        start = s32;
        end = e32;
    }
    if (start < 0 || end < start || end > c->data_size) {
        *ok = 0;
        return 0;
    }
    *p = c->data + start;
    *len = end - start;
    return 1;
}

/* Row `row` of an integer column of `width` bytes (4 or 8): 1 and *v when set, 0 when null or absent. */
int int_at(const pns_ints_t *c, int64_t row, int width, int64_t *v, int *ok) {
    if (c->values == NULL) return 0;
    int64_t i = c->offset + row;
    if (!bit_set(c->valid, c->valid_size, i, ok)) return 0;
    if (i < 0 || (i + 1) * width > c->values_size) {
        *ok = 0;
        return 0;
    }
    if (width == 4) {
        int32_t v32;
        memcpy(&v32, c->values + i * 4, 4);
        *v = v32;
    } else {
        memcpy(v, c->values + i * 8, 8);
    }
    return 1;
}

/* Row `row`'s entries of a map column: 1 and [*first, *end) when set, 0 when null, absent or empty. */
int map_at(const pns_map_t *m, int64_t row, int64_t *first, int64_t *end, int *ok) {
    if (m->offsets == NULL) return 0;
    int64_t i = m->offset + row;
    if (!bit_set(m->valid, m->valid_size, i, ok)) return 0;
    if (i < 0 || (i + 2) * 4 > m->offsets_size) {
        *ok = 0;
        return 0;
    }
    int32_t s32, e32;
    memcpy(&s32, m->offsets + i * 4, 4);
    memcpy(&e32, m->offsets + (i + 1) * 4, 4);
    if (s32 < 0 || e32 < s32) {
        *ok = 0;
        return 0;
    }
    *first = s32;
    *end = e32;
    return e32 > s32;
}

/* Why row `row`'s properties are not sent here as the Python sender sends them (a dict of the pairs), or NULL:
 * a null key or value (Python's error names the column), a NUL character, a key given twice (a dict keeps one). */
const char *properties_problem(const pns_map_t *m, int64_t row, int *ok) {
    int64_t first, end;
    if (!map_at(m, row, &first, &end, ok)) return NULL;
    for (int64_t j = first; j < end && *ok; j++) {
        const uint8_t *k, *v;
        int64_t klen, vlen;
        if (!string_at(&m->keys, j, &k, &klen, ok) || !string_at(&m->values, j, &v, &vlen, ok))
            return *ok ? "a null property" : NULL;
        if (memchr(k, 0, (size_t)klen) != NULL || memchr(v, 0, (size_t)vlen) != NULL) return "a property with a NUL character";
        for (int64_t e = first; e < j && *ok; e++) {
            const uint8_t *k2;
            int64_t k2len;
            if (string_at(&m->keys, e, &k2, &k2len, ok) && k2len == klen && memcmp(k, k2, (size_t)klen) == 0)
                return "a property key given twice in one row";
        }
    }
    return NULL;
}

/* java.lang.String.hashCode() of UTF-8 bytes: over their UTF-16 code units (routing.py's java_string_hash). */
int32_t java_string_hash(const uint8_t *s, int64_t n) {
    uint32_t h = 0;
    int64_t i = 0;
    while (i < n) {
        uint32_t c = s[i], cp;
        int extra = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
        if (extra < 0 || i + extra >= n) { /* not UTF-8 (Arrow strings are): as U+FFFD */
            cp = 0xFFFD;
            i++;
        } else {
            cp = extra == 0 ? c : extra == 1 ? (c & 0x1F) : extra == 2 ? (c & 0x0F) : (c & 0x07);
            for (int k = 1; k <= extra; k++) cp = cp << 6 | (s[i + k] & 0x3F);
            i += extra + 1;
        }
        if (cp >= 0x10000) {
            cp -= 0x10000;
            h = 31 * h + (0xD800 + (cp >> 10));
            h = 31 * h + (0xDC00 + (cp & 0x3FF));
        } else {
            h = 31 * h + cp;
        }
    }
    return (int32_t)h;
}
