/*
 * sending.c: a batch's rows routed to their destinations (pns_route) and sent (pns_send), and the structures' layout
 * Python checks (send_internal.h: the native sender's overview).
 */
#include "send_internal.h"

/* What pns_route found. */
enum { ROUTE_OK = 0, ROUTE_BAD_PARTITION = 1, ROUTE_NEEDS_PYTHON = 2, ROUTE_BAD_BUFFER = 3 };

/* Every row's destination into `dest` (int32, `dest_size` bytes), and `used` (one byte per lane, `used_size`
 * bytes) marks the lanes the batch needs. Returns ROUTE_OK; ROUTE_BAD_PARTITION with *row the first row whose
 * partition the topic does not have; ROUTE_NEEDS_PYTHON with *row and *why for a row this file cannot encode
 * (a key with a NUL character, a null value without pulsar_message_set_null_value, a negative event time);
 * ROUTE_BAD_BUFFER when a buffer is smaller than its rows need. The round robin advances only on ROUTE_OK. */
PAR_EXPORT int pns_route(void *task, const pns_batch_t *b, int32_t *dest, int64_t dest_size, uint8_t *used,
                         int64_t used_size, int64_t *row, const char **why) {
    pns_task_t *t = task;
    int ok = 1;
    *row = -1;
    *why = "";
    if (t == NULL || b == NULL || b->rows < 0 || dest_size < b->rows * 4 || used_size < t->lanes_n) return ROUTE_BAD_BUFFER;
    memset(used, 0, (size_t)t->lanes_n);
    int64_t next = t->next;
    for (int64_t r = 0; r < b->rows; r++) {
        const uint8_t *p;
        int64_t len, given = -1, ms;
        *row = r;
        if (!string_at(&b->value, r, &p, &len, &ok) && ok && s_set_null_value == NULL) {
            *why = "a null value (this libpulsar cannot send a message without payload)";
            return ROUTE_NEEDS_PYTHON;
        }
        if (string_at(&b->ordering_key, r, &p, &len, &ok) && memchr(p, 0, (size_t)len) != NULL) {
            *why = "an ordering key with a NUL character";
            return ROUTE_NEEDS_PYTHON;
        }
        if (int_at(&b->event_ms, r, 8, &ms, &ok) && ms < 0) {
            *why = "an event time before 1970";
            return ROUTE_NEEDS_PYTHON;
        }
        const char *props = properties_problem(&b->properties, r, &ok);
        if (props != NULL) {
            *why = props;
            return ROUTE_NEEDS_PYTHON;
        }
        int has_key = string_at(&b->key, r, &p, &len, &ok);
        if (has_key && memchr(p, 0, (size_t)len) != NULL) {
            *why = "a key with a NUL character";
            return ROUTE_NEEDS_PYTHON;
        }
        int has_partition = int_at(&b->partition, r, 4, &given, &ok) && given != -1;
        if (!ok) return ROUTE_BAD_BUFFER;
        int32_t lane;
        if (t->partitions == 0) {
            if (has_partition && given != t->topic_partition) return ROUTE_BAD_PARTITION;
            lane = 0;
        } else if (has_partition) {
            if (given < 0 || given >= t->partitions) return ROUTE_BAD_PARTITION;
            lane = (int32_t)given;
        } else if (has_key) {
            int64_t h = java_string_hash(p, len) % t->partitions;
            lane = (int32_t)(h < 0 ? h + t->partitions : h);
        } else {
            lane = (int32_t)(next % t->partitions);
            if (!t->single) next++;
        }
        dest[r] = lane;
        used[lane] = 1;
    }
    *row = -1;
    t->next = next;
    return ROUTE_OK;
}

static const char *c_string(pns_task_t *t, int which, const uint8_t *p, int64_t len) {
    if (len + 1 > t->scratch_cap[which]) {
        int64_t cap = (len + 1) * 2;
        char *grown = realloc(t->scratch[which], (size_t)cap);
        if (grown == NULL) return NULL;
        t->scratch[which] = grown;
        t->scratch_cap[which] = cap;
    }
    memcpy(t->scratch[which], p, (size_t)len);
    t->scratch[which][len] = 0;
    return t->scratch[which];
}

/* Send rows [first, end) of the batch as routed by pns_route (`dest`), row r with sequence id `sequence_base + r` when
 * sequence_base >= 0 (effectivelyOnce: rows in batches the broker holds are skipped and counted in *skipped, and
 * batches cut where pns_task_cuts says: lane_place), else the producer's own. Stops before the next row once a send
 * failed. Returns the rows handed to the producers; -1 when a lane has no producer or a buffer is too small (nothing is sent then). */
PAR_EXPORT int64_t pns_send(void *task, const pns_batch_t *b, const int32_t *dest, int64_t dest_size, int64_t first,
                            int64_t end, int64_t sequence_base, int64_t *skipped) {
    pns_task_t *t = task;
    int ok = 1;
    *skipped = 0;
    if (t == NULL || b == NULL || first < 0 || end < first || end > b->rows || dest_size < b->rows * 4) return -1;
    for (int64_t r = first; r < end; r++)
        if (dest[r] < 0 || dest[r] >= t->lanes_n || t->lanes[dest[r]].producer == NULL) return -1;
    int64_t handed = 0;
    for (int64_t r = first; r < end; r++) {
        if (__atomic_load_n(&t->error, __ATOMIC_ACQUIRE) != 0) break;
        lane_t *lane = &t->lanes[dest[r]];
        int64_t sequence_id = sequence_base >= 0 ? sequence_base + r : -1;
        const uint8_t *p;
        int64_t len, ms;
        int cut = 0, closes = 0;
        if (sequence_id >= 0) {
            int64_t size = string_at(&b->value, r, &p, &len, &ok) ? len : 0;
            if (lane_place(t, lane, sequence_id, size, &cut, &closes)) {
                (*skipped)++;
                continue;
            }
        }
        if (t->pace_window_ns && (t->sent - __atomic_load_n(&t->answered, __ATOMIC_RELAXED) - t->held >= t->pace_allowed ||
                                  monotonic_ns() >= t->pace_until_ns)) {
            pace(t);
            if (__atomic_load_n(&t->error, __ATOMIC_ACQUIRE) != 0) break;
        }
        pulsar_message_t *msg = s_pulsar_message_create();
        if (string_at(&b->value, r, &p, &len, &ok))
            s_pulsar_message_set_content(msg, p, (size_t)len);
        else if (ok && s_set_null_value != NULL)
            s_set_null_value(msg);
        const char *text;
        if (string_at(&b->key, r, &p, &len, &ok) && len > 0 && (text = c_string(t, 0, p, len)) != NULL)
            s_pulsar_message_set_partition_key(msg, text);
        if (string_at(&b->ordering_key, r, &p, &len, &ok) && len > 0 && (text = c_string(t, 0, p, len)) != NULL)
            s_pulsar_message_set_ordering_key(msg, text);
        if (int_at(&b->event_ms, r, 8, &ms, &ok) && ms > 0) s_pulsar_message_set_event_timestamp(msg, (uint64_t)ms);
        if (sequence_id > 0) s_pulsar_message_set_sequence_id(msg, sequence_id);
        int64_t first, end;
        if (map_at(&b->properties, r, &first, &end, &ok)) {
            for (int64_t j = first; j < end && ok; j++) {
                const uint8_t *k, *v;
                int64_t klen, vlen;
                const char *ktext, *vtext;
                if (string_at(&b->properties.keys, j, &k, &klen, &ok) && string_at(&b->properties.values, j, &v, &vlen, &ok) &&
                    (ktext = c_string(t, 0, k, klen)) != NULL && (vtext = c_string(t, 1, v, vlen)) != NULL)
                    s_pulsar_message_set_property(msg, ktext, vtext);
            }
        }
        if (!ok) { /* pns_route read the same buffers; only a caller that changed them between the calls gets here */
            p_pulsar_message_free(msg);
            return handed > 0 ? handed : -1;
        }
        pthread_mutex_lock(&t->lock);
        t->refs++;
        t->sent++;
        pthread_mutex_unlock(&t->lock);
        /* Blocks while the producer's queue is full (blockIfQueueFull); the callback may run before it returns. */
        s_pulsar_producer_send_async(lane->producer, msg, on_sent, lane);
        p_pulsar_message_free(msg); /* the producer holds its own reference to the built message */
        if (sequence_id >= 0) lane_sent(t, lane, closes);
        if (cut) s_pulsar_producer_flush_async(lane->producer, flushed, NULL); /* effectivelyOnce: the batch ends here */
        handed++;
    }
    return handed;
}

/* pns_batch_t's size and each field's offset, which Python's ctypes mirror is checked against at load. */
PAR_EXPORT int64_t pns_layout(int which) {
    switch (which) {
    case 0: return (int64_t)sizeof(pns_batch_t);
    case 1: return (int64_t)sizeof(pns_strings_t);
    case 2: return (int64_t)sizeof(pns_ints_t);
    case 3: return (int64_t)offsetof(pns_batch_t, key);
    case 4: return (int64_t)offsetof(pns_batch_t, partition);
    case 5: return (int64_t)offsetof(pns_batch_t, event_ms);
    case 6: return (int64_t)sizeof(pns_state_t);
    case 7: return (int64_t)offsetof(pns_batch_t, properties);
    case 8: return (int64_t)sizeof(pns_map_t);
    default: return -1;
    }
}
