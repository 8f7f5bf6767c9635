/*
 * The entry-level spike (bench/entry_level_spike.py, issue 44): a batched entry's payload as the broker stores it
 * (uncompressed: [4-byte big-endian size][SingleMessageMetadata][payload] per message) split straight into Arrow
 * column buffers (value and key as binary columns, event time, sequence id), with no client and no per-message
 * object: what a read path that received whole entries would spend per message on top of the network.
 * Every read is bounds checked; a malformed entry returns -1.
 *
 *   int64_t split_entries(data, entry_starts, n_entries, value_offsets, value_data, value_cap,
 *                         key_offsets, key_data, key_cap, event_time, sequence_id, max_rows)
 * entry i is data[entry_starts[i] .. entry_starts[i + 1]); returns the rows written, or -1.
 */
#include <stdint.h>
#include <string.h>

static int varint(const uint8_t *p, const uint8_t *end, const uint8_t **next, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64 && p < end; shift += 7) {
        uint8_t b = *p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) { *next = p; *out = v; return 0; }
    }
    return -1;
}

int64_t split_entries(const uint8_t *data, const int64_t *entry_starts, int32_t n_entries,
                      int32_t *value_offsets, uint8_t *value_data, int64_t value_cap,
                      int32_t *key_offsets, uint8_t *key_data, int64_t key_cap,
                      int64_t *event_time, int64_t *sequence_id, int64_t max_rows) {
    int64_t rows = 0, value_used = 0, key_used = 0;
    value_offsets[0] = 0;
    key_offsets[0] = 0;
    for (int32_t e = 0; e < n_entries; e++) {
        const uint8_t *p = data + entry_starts[e], *end = data + entry_starts[e + 1];
        while (p < end) {
            if (end - p < 4 || rows >= max_rows) return -1;
            uint32_t meta_size = ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
            p += 4;
            if ((uint64_t)(end - p) < meta_size) return -1;
            const uint8_t *m = p, *meta_end = p + meta_size;
            uint64_t payload_size = 0, event = 0, seq = 0;
            const uint8_t *key = NULL;
            uint64_t key_len = 0;
            while (m < meta_end) {
                uint64_t tag, v;
                if (varint(m, meta_end, &m, &tag)) return -1;
                switch (tag & 7) {
                case 0:  /* varint */
                    if (varint(m, meta_end, &m, &v)) return -1;
                    if ((tag >> 3) == 3) payload_size = v;
                    else if ((tag >> 3) == 5) event = v;
                    else if ((tag >> 3) == 8) seq = v;
                    break;
                case 2:  /* length-delimited */
                    if (varint(m, meta_end, &m, &v) || v > (uint64_t)(meta_end - m)) return -1;
                    if ((tag >> 3) == 2) { key = m; key_len = v; }
                    m += v;
                    break;
                case 1: if (meta_end - m < 8) return -1; m += 8; break;
                case 5: if (meta_end - m < 4) return -1; m += 4; break;
                default: return -1;
                }
            }
            p = meta_end;
            if (payload_size > (uint64_t)(end - p) || value_used + (int64_t)payload_size > value_cap
                || key_used + (int64_t)key_len > key_cap) return -1;
            memcpy(value_data + value_used, p, payload_size);
            value_used += (int64_t)payload_size;
            if (key_len) memcpy(key_data + key_used, key, key_len);
            key_used += (int64_t)key_len;
            p += payload_size;
            event_time[rows] = (int64_t)event;
            sequence_id[rows] = (int64_t)seq;
            rows++;
            value_offsets[rows] = (int32_t)value_used;
            key_offsets[rows] = (int32_t)key_used;
        }
    }
    return rows;
}
