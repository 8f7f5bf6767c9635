/*
 * columns.c: the column buffers one batch is filled into, a message at a time (bounds checked: buf_reserve).
 */
#include "par_internal.h"

/* ---- growable buffers -------------------------------------------------------------------------- */

int buf_reserve(buf_t *b, int64_t extra) {
    if (extra < 0 || b->len > INT64_MAX - extra) return -1;
    int64_t need = b->len + extra;
    if (need <= b->cap) return 0;
    int64_t cap = b->cap > 0 ? b->cap : 256;
    while (cap < need) {
        if (cap > INT64_MAX / 2) return -1;
        cap *= 2;
    }
    /* 64-byte alignment, as Arrow prefers; the tail past len stays unspecified. */
    uint8_t *data = NULL;
    if (posix_memalign((void **)&data, 64, (size_t)cap) != 0) return -1;
    if (b->len > 0) memcpy(data, b->data, (size_t)b->len);
    free(b->data);
    b->data = data;
    b->cap = cap;
    return 0;
}

static int buf_append(buf_t *b, const void *src, int64_t n) {
    if (buf_reserve(b, n) != 0) return -1;
    if (n > 0) memcpy(b->data + b->len, src, (size_t)n);
    b->len += n;
    return 0;
}

static int buf_i32(buf_t *b, int32_t v) { return buf_append(b, &v, sizeof v); }
static int buf_i64(buf_t *b, int64_t v) { return buf_append(b, &v, sizeof v); }

static void buf_free(buf_t *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

static int32_t buf_i32_at(const buf_t *b, int64_t i) {
    int32_t v = 0;
    if (i >= 0 && (i + 1) * 4 <= b->len) memcpy(&v, b->data + i * 4, 4);
    return v;
}

/* A validity bitmap of `rows` bits; bit i set = row i is valid. */
static int bit_set(buf_t *b, int64_t row, int valid) {
    int64_t byte = row >> 3;
    if (byte >= b->len) {
        if (buf_reserve(b, byte + 1 - b->len) != 0) return -1;
        memset(b->data + b->len, 0, (size_t)(byte + 1 - b->len));
        b->len = byte + 1;
    }
    if (valid)
        b->data[byte] |= (uint8_t)(1u << (row & 7));
    else
        b->data[byte] &= (uint8_t)~(1u << (row & 7));
    return 0;
}

/* ---- the columns of one batch ------------------------------------------------------------------- */

static int varcol_init(varcol_t *c) { return c->offsets.len == 0 ? buf_i32(&c->offsets, 0) : 0; }

static int varcol_push(varcol_t *c, int64_t row, const void *bytes, int64_t n, int valid) {
    int64_t end = (int64_t)buf_i32_at(&c->offsets, (c->offsets.len / 4) - 1) + n;
    if (end > INT32_MAX) return -1; /* the caller starts a new batch before this can happen */
    if (bit_set(&c->valid, row, valid) != 0) return -1;
    if (buf_append(&c->data, bytes, n) != 0) return -1;
    return buf_i32(&c->offsets, (int32_t)end);
}

int columns_init(columns_t *c) {
    for (int i = 0; i < N_VARCOLS; i++)
        if (varcol_init(&c->var[i]) != 0) return -1;
    return c->prop_offsets.len == 0 ? buf_i32(&c->prop_offsets, 0) : 0;
}

void columns_free(columns_t *c) {
    for (int i = 0; i < N_VARCOLS; i++) {
        buf_free(&c->var[i].valid);
        buf_free(&c->var[i].offsets);
        buf_free(&c->var[i].data);
    }
    buf_free(&c->publish_us);
    buf_free(&c->event_valid);
    buf_free(&c->event_us);
    buf_free(&c->prop_offsets);
    buf_free(&c->schema_version);
    c->rows = c->props = 0;
}

static void varcol_truncate(varcol_t *c, int64_t items) {
    c->offsets.len = (items + 1) * 4;
    c->data.len = buf_i32_at(&c->offsets, items);
    /* validity bits past `items` are rewritten by the next push */
}

/* Drop rows [rows, c->rows): the messages of an entry the range does not own. */
void columns_truncate(columns_t *c, int64_t rows) {
    if (rows < 0 || rows >= c->rows) return;
    int64_t props = buf_i32_at(&c->prop_offsets, rows);
    for (int i = COL_KEY; i <= COL_PRODUCER; i++) varcol_truncate(&c->var[i], rows);
    varcol_truncate(&c->var[COL_PROP_KEY], props);
    varcol_truncate(&c->var[COL_PROP_VALUE], props);
    c->publish_us.len = rows * 8;
    c->event_us.len = rows * 8;
    c->schema_version.len = rows * 8;
    c->prop_offsets.len = (rows + 1) * 4;
    c->rows = rows;
    c->props = props;
}

static int push_text(varcol_t *c, int64_t row, const char *text, int empty_is_null) {
    size_t n = text != NULL ? strlen(text) : 0;
    return varcol_push(c, row, text, (int64_t)n, !(n == 0 && empty_is_null));
}

int append_message(columns_t *c, pulsar_message_t *msg, const uint8_t *id_bytes, int id_len) {
    int64_t row = c->rows;
    const void *data = p_pulsar_message_get_data(msg);
    uint32_t length = p_pulsar_message_get_length(msg);
    int null_value = length == 0 && p_pulsar_message_has_null_value(msg);
    uint64_t event_ms = p_pulsar_message_get_event_timestamp(msg);
    int64_t schema_version = -1;
    if (p_pulsar_message_has_schema_version(msg)) {
        /* The broker's schema versions are 8-byte big-endian longs (BytesSchemaVersion). */
        const uint8_t *v = (const uint8_t *)p_pulsar_message_get_schemaVersion(msg);
        schema_version = 0;
        for (int i = 0; v != NULL && i < 8; i++) schema_version = (schema_version << 8) | v[i];
    }
    if (push_text(&c->var[COL_KEY], row, p_pulsar_message_get_partitionKey(msg), 1) != 0 ||
        varcol_push(&c->var[COL_VALUE], row, data, length, !null_value) != 0 ||
        varcol_push(&c->var[COL_ID], row, id_bytes, id_len, 1) != 0 ||
        push_text(&c->var[COL_ORDERING], row, p_pulsar_message_get_orderingKey(msg), 1) != 0 ||
        push_text(&c->var[COL_PRODUCER], row, p_pulsar_message_get_producer_name(msg), 0) != 0 ||
        buf_i64(&c->publish_us, (int64_t)p_pulsar_message_get_publish_timestamp(msg) * 1000) != 0 ||
        bit_set(&c->event_valid, row, event_ms != 0) != 0 || buf_i64(&c->event_us, (int64_t)event_ms * 1000) != 0 ||
        buf_i64(&c->schema_version, schema_version) != 0)
        return -1;
    pulsar_string_map_t *props = p_pulsar_message_get_properties(msg);
    int n = props != NULL ? p_pulsar_string_map_size(props) : 0;
    for (int i = 0; i < n; i++) {
        if (push_text(&c->var[COL_PROP_KEY], c->props, p_pulsar_string_map_get_key(props, i), 0) != 0 ||
            push_text(&c->var[COL_PROP_VALUE], c->props, p_pulsar_string_map_get_value(props, i), 0) != 0) {
            p_pulsar_string_map_free(props);
            return -1;
        }
        c->props++;
    }
    if (props != NULL) p_pulsar_string_map_free(props);
    if (c->props > INT32_MAX || buf_i32(&c->prop_offsets, (int32_t)c->props) != 0) return -1;
    c->rows++;
    return 0;
}

/* The value bytes one batch holds at most: Arrow's int32 offsets, less room for the other variable-width
 * columns of the message that fills it. (The conformance test builds the library with a small budget.) */
#ifndef PAR_BATCH_VALUE_BYTES
#define PAR_BATCH_VALUE_BYTES INT32_MAX
#endif
#ifndef PAR_BATCH_HEADROOM
#define PAR_BATCH_HEADROOM 65536
#endif

/* Whether appending `msg` to a batch that holds rows could take a variable-width column past its budget. */
int would_overflow(const columns_t *c, pulsar_message_t *msg) {
    int64_t values = c->var[COL_VALUE].data.len;
    return c->rows > 0 && values + (int64_t)p_pulsar_message_get_length(msg) + PAR_BATCH_HEADROOM > PAR_BATCH_VALUE_BYTES;
}
