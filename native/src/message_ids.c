/*
 * message_ids.c: a message id's MessageIdData protobuf, read with every read bounds checked (parse_id).
 */
#include "par_internal.h"

/* ---- message ids: MessageIdData protobuf ------------------------------------------------------- */

static int read_varint(const uint8_t *p, int64_t n, int64_t *i, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*i >= n) return -1;
        uint8_t b = p[(*i)++];
        v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* Fields 1 ledgerId, 2 entryId, 4 batch_index, 6 batch_size, 7 first_chunk_message_id {1, 2};
 * others skipped by wire type. 0, or -1 for bytes that are not a MessageIdData. */
int parse_id(const uint8_t *p, int64_t n, msg_id_t *id, int nested) {
    int64_t i = 0;
    if (!nested) {
        id->ledger = id->entry = -1;
        id->batch_index = -1;
        id->batch_size = 0;
        id->first_chunk_ledger = id->first_chunk_entry = -1;
    }
    while (i < n) {
        uint64_t tag, v;
        if (read_varint(p, n, &i, &tag) != 0) return -1;
        uint64_t field = tag >> 3, wire = tag & 7;
        if (wire == 0) {
            if (read_varint(p, n, &i, &v) != 0) return -1;
            if (nested) {
                if (field == 1) id->first_chunk_ledger = (int64_t)v;
                if (field == 2) id->first_chunk_entry = (int64_t)v;
            } else if (field == 1) {
                id->ledger = (int64_t)v;
            } else if (field == 2) {
                id->entry = (int64_t)v;
            } else if (field == 4) {
                id->batch_index = (int32_t)v;
            } else if (field == 6) {
                id->batch_size = (int32_t)v;
            }
        } else if (wire == 2) {
            if (read_varint(p, n, &i, &v) != 0 || v > (uint64_t)(n - i)) return -1;
            if (field == 7 && !nested && parse_id(p + i, (int64_t)v, id, 1) != 0) return -1;
            i += (int64_t)v;
        } else if (wire == 1 || wire == 5) {
            int64_t size = wire == 1 ? 8 : 4;
            if (size > n - i) return -1;
            i += size;
        } else {
            return -1;
        }
    }
    return id->ledger >= 0 && id->entry >= 0 ? 0 : -1;
}

int message_id_of(pulsar_message_t *msg, uint8_t **bytes, int *len, msg_id_t *id) {
    pulsar_message_id_t *mid = p_pulsar_message_get_message_id(msg);
    *bytes = mid != NULL ? p_pulsar_message_id_serialize(mid, len) : NULL;
    if (mid != NULL) p_pulsar_message_id_free(mid);
    if (*bytes == NULL || *len < 0) return -1;
    return parse_id(*bytes, *len, id, 0);
}
