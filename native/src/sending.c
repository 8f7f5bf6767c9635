/*
 * sending.c: a batch's rows routed to their destinations (pns_route) and sent (pns_send), and the structures' layout
 * Python checks (send_internal.h: the native sender's overview).
 */
#include "send_internal.h"

/* What pns_route found. */
#ifndef PACE_CLOCK_ROWS
#define PACE_CLOCK_ROWS 64 /* a power of two */
#endif
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

/* The payloads of one pns_send call: one copy of the values its rows send, which every message's payload points into
 * (pulsar_message_set_allocated_content), instead of a buffer allocated and copied per message by set_content (10 %
 * of the task thread, bench/README.md "jvm_sink.py"). A send's callback context is the block's entry for its lane.
 *
 * Lifetime: libpulsar reads a payload until the broker confirmed it (a batch copies it when it closes; an unbatched
 * send keeps it until its answer, and the connection may still hold it in its write queue after a failed answer:
 * ClientConnection::sendMessage, pendingWriteBuffers_). So a block is freed when every send made from it was
 * answered OK; a block with a failed send is kept with the task (task_release frees it), whose last reference Python
 * drops after closing the client (native_task.NativeTask.close on a failure), when no connection is left to write. */
typedef struct payloads payloads_t;
typedef struct {
    lane_t *lane;
    payloads_t *block;
} send_ctx_t;
struct payloads {
    kept_t kept;   /* first: a failed block is kept as itself */
    int64_t refs;  /* atomic: pns_send's own and one per send */
    int32_t failed; /* atomic: a send answered with an error */
    int32_t lanes;
    uint8_t *data; /* the values' bytes [lo, hi) of the batch's value buffer */
    send_ctx_t ctx[]; /* one per lane, then the data */
};

static payloads_t *payloads_create(pns_task_t *t, int64_t size) {
    size_t head = sizeof(payloads_t) + (size_t)t->lanes_n * sizeof(send_ctx_t);
    payloads_t *b = malloc(head + (size_t)size + 1);
    if (b == NULL) return NULL;
    b->kept.next = NULL;
    b->refs = 1;
    b->failed = 0;
    b->lanes = t->lanes_n;
    b->data = (uint8_t *)b + head;
    for (int32_t i = 0; i < t->lanes_n; i++) {
        b->ctx[i].lane = &t->lanes[i];
        b->ctx[i].block = b;
    }
    return b;
}

/* One reference to the block dropped (the task is alive: the caller holds a reference to it). */
static void payloads_release(pns_task_t *t, payloads_t *b) {
    if (__atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) > 0) return;
    if (!__atomic_load_n(&b->failed, __ATOMIC_ACQUIRE)) {
        free(b);
        return;
    }
    pthread_mutex_lock(&t->lock);
    b->kept.next = t->kept;
    t->kept = &b->kept;
    pthread_mutex_unlock(&t->lock);
}

/* A send's answer: its block's reference, then the task's count (on_sent, which may drop the task's last reference). */
static void on_sent_from_block(pulsar_result result, pulsar_message_id_t *id, void *ctx) {
    send_ctx_t *c = ctx; /* inside the block: read before the block may be freed */
    lane_t *lane = c->lane;
    payloads_t *block = c->block;
    if (result != PULSAR_RESULT_OK) __atomic_store_n(&block->failed, 1, __ATOMIC_RELEASE);
    payloads_release(lane->task, block);
    on_sent(result, id, lane);
}

/* The span [*lo, *hi) of the value buffer that rows [first, end) use (bounds checked as every read); 0 on a bad buffer. */
static int value_span(const pns_batch_t *b, int64_t first, int64_t end, int64_t *lo, int64_t *hi) {
    int ok = 1;
    *lo = INT64_MAX;
    *hi = 0;
    for (int64_t r = first; r < end; r++) {
        const uint8_t *p;
        int64_t len;
        if (string_at(&b->value, r, &p, &len, &ok)) {
            int64_t at = p - b->value.data;
            if (at < *lo) *lo = at;
            if (at + len > *hi) *hi = at + len;
        }
        if (!ok) return 0;
    }
    if (*lo > *hi) *lo = *hi = 0; /* no value set */
    return 1;
}

/* Send rows [first, end) of the batch as routed by pns_route (`dest`), row r with sequence id `sequence_base + r` when
 * sequence_base >= 0 (effectivelyOnce: rows in batches the broker holds are skipped and counted in *skipped, and
 * batches cut where pns_task_cuts says: lane_place), else the producer's own. Stops before the next row once a send
 * failed. Returns the rows handed to the producers; -1 when a lane has no producer or a buffer is too small (nothing is sent then). */
PAR_EXPORT int64_t pns_send(void *task, const pns_batch_t *b, const int32_t *dest, int64_t dest_size, int64_t first,
                            int64_t end, int64_t sequence_base, int64_t *skipped) {
    pns_task_t *t = task;
    int ok = 1;
    int64_t lo, hi;
    *skipped = 0;
    if (t == NULL || b == NULL || first < 0 || end < first || end > b->rows || dest_size < b->rows * 4) return -1;
    for (int64_t r = first; r < end; r++)
        if (dest[r] < 0 || dest[r] >= t->lanes_n || t->lanes[dest[r]].producer == NULL) return -1;
    if (!value_span(b, first, end, &lo, &hi)) return -1;
    payloads_t *block = payloads_create(t, hi - lo); /* NULL (no memory): each message copies its payload */
    if (block != NULL) memcpy(block->data, b->value.data + lo, (size_t)(hi - lo));
    /* The task's references for every send of the call at once (one lock, not one per row); those not used are
     * given back at the end. Python holds its own reference across the call, so refs never reaches 0 here. */
    pthread_mutex_lock(&t->lock);
    t->refs += end - first;
    pthread_mutex_unlock(&t->lock);
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
        /* The clock is read every PACE_CLOCK_ROWS sends (a vDSO call per row was 1.5 % of a task's CPU): the bound it
         * renews holds for an eighth of the window (0.9 s at the default send timeout), far longer than those rows.
         * Rows held in an effectivelyOnce batch not yet cut are not in flight (t->held). */
        if (t->pace_window_ns &&
            (t->sent - __atomic_load_n(&t->answered, __ATOMIC_RELAXED) - t->held >= t->pace_allowed ||
             ((t->sent & (PACE_CLOCK_ROWS - 1)) == 0 && monotonic_ns() >= t->pace_until_ns))) {
            pace(t);
            if (__atomic_load_n(&t->error, __ATOMIC_ACQUIRE) != 0) break;
        }
        pulsar_message_t *msg = s_pulsar_message_create();
        if (string_at(&b->value, r, &p, &len, &ok)) {
            if (block != NULL)
                s_pulsar_message_set_allocated_content(msg, block->data + (p - b->value.data - lo), (size_t)len);
            else
                s_pulsar_message_set_content(msg, p, (size_t)len);
        } else if (ok && s_set_null_value != NULL) {
            s_set_null_value(msg);
        }
        const char *text;
        if (string_at(&b->key, r, &p, &len, &ok) && len > 0 && (text = c_string(t, 0, p, len)) != NULL)
            s_pulsar_message_set_partition_key(msg, text);
        if (string_at(&b->ordering_key, r, &p, &len, &ok) && len > 0 && (text = c_string(t, 0, p, len)) != NULL)
            s_pulsar_message_set_ordering_key(msg, text);
        if (int_at(&b->event_ms, r, 8, &ms, &ok) && ms > 0) s_pulsar_message_set_event_timestamp(msg, (uint64_t)ms);
        if (sequence_id > 0) s_pulsar_message_set_sequence_id(msg, sequence_id);
        int64_t pfirst, pend;
        if (map_at(&b->properties, r, &pfirst, &pend, &ok)) {
            for (int64_t j = pfirst; j < pend && ok; j++) {
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
            break;
        }
        t->sent++; /* the task's thread alone writes and reads it (pns_wait is called on it too) */
        /* Blocks while the producer's queue is full (blockIfQueueFull); the callback may run before it returns. */
        if (block != NULL) {
            __atomic_add_fetch(&block->refs, 1, __ATOMIC_RELAXED);
            s_pulsar_producer_send_async(lane->producer, msg, on_sent_from_block, &block->ctx[dest[r]]);
        } else {
            s_pulsar_producer_send_async(lane->producer, msg, on_sent, lane);
        }
        p_pulsar_message_free(msg); /* the producer holds its own reference to the built message */
        if (sequence_id >= 0) lane_sent(t, lane, closes);
        if (cut) s_pulsar_producer_flush_async(lane->producer, flushed, NULL); /* effectivelyOnce: the batch ends here */
        handed++;
    }
    pthread_mutex_lock(&t->lock);
    t->refs -= end - first - handed;
    pthread_mutex_unlock(&t->lock);
    if (block != NULL) payloads_release(t, block);
    return !ok && handed == 0 ? -1 : handed;
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
