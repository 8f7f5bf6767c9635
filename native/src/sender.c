/*
 * sender.c: the native sender of the sink (writing/native_send.py): one Arrow record batch's rows sent through
 * libpulsar's C API, one pulsar_producer_send_async per row, the broker's answers counted by a C callback.
 *
 * Why: the Python sender pays a Python callback per message on the client's I/O thread (it takes the GIL from the
 * task's thread each time: two thirds of a write task's CPU, bench/README.md "jvm_sink"). Here the callback is C:
 * it counts confirmations per destination and keeps the first error, under a mutex, and the task's thread waits
 * for all of them in pns_wait. Python keeps what is not per row: the options, the producers' lifetimes, quotas,
 * the effectively-once skip's inputs (each producer's last persisted sequence id) and the errors' wording.
 *
 * A task (pns_task_t) holds the destinations (one producer per partition, set by Python once opened), the round
 * robin's next partition and the answers. One batch is first routed (pns_route: every row's destination, and
 * whether the batch holds anything this file does not encode), then sent (pns_send). Every buffer read is bounds
 * checked against the sizes Python passes (the Arrow buffers' own); a bad buffer is refused, never read past.
 *
 * Pacing: a task keeps no more sends in flight than the broker confirmed lately (pns_task_pace), as the Python sender
 * does, so a send waits its turn in pns_send rather than in the producer's queue, where its timeout would run.
 *
 * Lifetime: a send's callback may come after the task gave up waiting (a send timeout fails it later), so the
 * task is reference counted: one reference for Python, one per unanswered send; the last one frees it.
 *
 * The producer symbols are resolved here, after par_load, optionally: a libpulsar without one of them leaves the
 * reader working and the sink on its Python sender (pns_init names the symbol).
 */
#include <pthread.h>
#include <stddef.h>
#include <time.h>

#include "par_internal.h"

typedef struct pulsar_producer pulsar_producer_t;
typedef struct pulsar_producer_configuration pulsar_producer_configuration_t;
typedef void (*pulsar_send_callback)(pulsar_result, pulsar_message_id_t *, void *);

#define SENDER_SYMBOLS(X)                                                                                         \
    X(pulsar_producer_configuration_t *, pulsar_producer_configuration_create, (void))                            \
    X(void, pulsar_producer_configuration_free, (pulsar_producer_configuration_t *))                              \
    X(void, pulsar_producer_configuration_set_producer_name, (pulsar_producer_configuration_t *, const char *))   \
    X(void, pulsar_producer_configuration_set_send_timeout, (pulsar_producer_configuration_t *, int))             \
    X(void, pulsar_producer_configuration_set_compression_type, (pulsar_producer_configuration_t *, int))        \
    X(void, pulsar_producer_configuration_set_max_pending_messages, (pulsar_producer_configuration_t *, int))     \
    X(void, pulsar_producer_configuration_set_max_pending_messages_across_partitions, (pulsar_producer_configuration_t *, int)) \
    X(void, pulsar_producer_configuration_set_block_if_queue_full, (pulsar_producer_configuration_t *, int))      \
    X(void, pulsar_producer_configuration_set_batching_enabled, (pulsar_producer_configuration_t *, int))         \
    X(void, pulsar_producer_configuration_set_batching_max_messages, (pulsar_producer_configuration_t *, unsigned int)) \
    X(void, pulsar_producer_configuration_set_batching_max_allowed_size_in_bytes, (pulsar_producer_configuration_t *, unsigned long)) \
    X(void, pulsar_producer_configuration_set_batching_max_publish_delay_ms, (pulsar_producer_configuration_t *, unsigned long)) \
    X(void, pulsar_producer_configuration_set_chunking_enabled, (pulsar_producer_configuration_t *, int))         \
    X(void, pulsar_producer_configuration_set_lazy_start_partitioned_producers, (pulsar_producer_configuration_t *, int)) \
    X(void, pulsar_producer_configuration_set_access_mode, (pulsar_producer_configuration_t *, int))              \
    X(pulsar_result, pulsar_client_create_producer, (pulsar_client_t *, const char *, const pulsar_producer_configuration_t *, pulsar_producer_t **)) \
    X(void, pulsar_producer_send_async, (pulsar_producer_t *, pulsar_message_t *, pulsar_send_callback, void *)) \
    X(int64_t, pulsar_producer_get_last_sequence_id, (pulsar_producer_t *))                                       \
    X(pulsar_result, pulsar_producer_flush, (pulsar_producer_t *))                                                \
    X(pulsar_result, pulsar_producer_close, (pulsar_producer_t *))                                                \
    X(void, pulsar_producer_free, (pulsar_producer_t *))                                                          \
    X(pulsar_message_t *, pulsar_message_create, (void))                                                          \
    X(void, pulsar_message_set_content, (pulsar_message_t *, const void *, size_t))                               \
    X(void, pulsar_message_set_partition_key, (pulsar_message_t *, const char *))                                 \
    X(void, pulsar_message_set_ordering_key, (pulsar_message_t *, const char *))                                  \
    X(void, pulsar_message_set_event_timestamp, (pulsar_message_t *, uint64_t))                                   \
    X(void, pulsar_message_set_sequence_id, (pulsar_message_t *, int64_t))                                       \
    X(void, pulsar_message_set_property, (pulsar_message_t *, const char *, const char *))

#define S_DEFINE(ret, name, args) static ret(*s_##name) args;
SENDER_SYMBOLS(S_DEFINE)
#undef S_DEFINE
/* Optional (newer libpulsar): a message without payload. Without it a batch with a null value goes to Python. */
static void (*s_set_null_value)(pulsar_message_t *);
static int g_sender_ready;

/* Resolve the sender's symbols in the libpulsar par_load bound. 0 on success; else -1, `err` naming the symbol. */
PAR_EXPORT int pns_init(char *err, size_t errlen) {
    if (g_sender_ready) return 0;
    if (g_lib == NULL) {
        set_error(err, errlen, "libpulsar not loaded", NULL);
        return -1;
    }
#define S_RESOLVE(ret, name, args)                                    \
    *(void **)(&s_##name) = dlsym(g_lib, #name);                      \
    if (s_##name == NULL) {                                           \
        set_error(err, errlen, "libpulsar lacks the symbol ", #name); \
        return -1;                                                    \
    }
    SENDER_SYMBOLS(S_RESOLVE)
#undef S_RESOLVE
    *(void **)(&s_set_null_value) = dlsym(g_lib, "pulsar_message_set_null_value");
    g_sender_ready = 1;
    return 0;
}

PAR_EXPORT int pns_null_values_supported(void) { return s_set_null_value != NULL; }

/* ---- producers: create_producer's keyword names this file applies (Python reads them: pns_setting_name) ---- */
typedef struct {
    const char *name;
    void (*apply)(pulsar_producer_configuration_t *conf, const char *value);
} psetting_t;

static long long num(const char *v) { return strtoll(v, NULL, 10); }
static void p_timeout(pulsar_producer_configuration_t *c, const char *v) { s_pulsar_producer_configuration_set_send_timeout(c, (int)num(v)); }
static void p_compression(pulsar_producer_configuration_t *c, const char *v) { s_pulsar_producer_configuration_set_compression_type(c, (int)num(v)); }
static void p_pending(pulsar_producer_configuration_t *c, const char *v) { s_pulsar_producer_configuration_set_max_pending_messages(c, (int)num(v)); }
static void p_pending_all(pulsar_producer_configuration_t *c, const char *v) { s_pulsar_producer_configuration_set_max_pending_messages_across_partitions(c, (int)num(v)); }
static void p_block(pulsar_producer_configuration_t *c, const char *v) { s_pulsar_producer_configuration_set_block_if_queue_full(c, (int)num(v)); }
static void p_batching(pulsar_producer_configuration_t *c, const char *v) { s_pulsar_producer_configuration_set_batching_enabled(c, (int)num(v)); }
static void p_batch_msgs(pulsar_producer_configuration_t *c, const char *v) { s_pulsar_producer_configuration_set_batching_max_messages(c, (unsigned int)num(v)); }
static void p_batch_bytes(pulsar_producer_configuration_t *c, const char *v) { s_pulsar_producer_configuration_set_batching_max_allowed_size_in_bytes(c, (unsigned long)num(v)); }
static void p_batch_delay(pulsar_producer_configuration_t *c, const char *v) { s_pulsar_producer_configuration_set_batching_max_publish_delay_ms(c, (unsigned long)num(v)); }
static void p_chunking(pulsar_producer_configuration_t *c, const char *v) { s_pulsar_producer_configuration_set_chunking_enabled(c, (int)num(v)); }
static void p_lazy(pulsar_producer_configuration_t *c, const char *v) { s_pulsar_producer_configuration_set_lazy_start_partitioned_producers(c, (int)num(v)); }
static void p_access(pulsar_producer_configuration_t *c, const char *v) { s_pulsar_producer_configuration_set_access_mode(c, (int)num(v)); }
static void p_name(pulsar_producer_configuration_t *c, const char *v) { s_pulsar_producer_configuration_set_producer_name(c, v); }

static const psetting_t PRODUCER_SETTINGS[] = {
    {"send_timeout_millis", p_timeout},
    {"compression_type", p_compression},
    {"max_pending_messages", p_pending},
    {"max_pending_messages_across_partitions", p_pending_all},
    {"block_if_queue_full", p_block},
    {"batching_enabled", p_batching},
    {"batching_max_messages", p_batch_msgs},
    {"batching_max_allowed_size_in_bytes", p_batch_bytes},
    {"batching_max_publish_delay_ms", p_batch_delay},
    {"chunking_enabled", p_chunking},
    {"lazy_start_partitioned_producers", p_lazy},
    {"access_mode", p_access},
    {"producer_name", p_name},
};
#define N_PRODUCER_SETTINGS (sizeof PRODUCER_SETTINGS / sizeof PRODUCER_SETTINGS[0])

PAR_EXPORT const char *pns_setting_name(int i) {
    if (i < 0 || (size_t)i >= N_PRODUCER_SETTINGS) return NULL;
    return PRODUCER_SETTINGS[i].name;
}

/* A producer on `topic` with the given settings (all of them numbers but producer_name). NULL on failure:
 * `result` is the pulsar_result (or 0 with `err` set for a setting this file does not know). */
PAR_EXPORT void *pns_producer_create(void *client, const char *topic, const char *const *names,
                                     const char *const *values, int n, int *result, char *err, size_t errlen) {
    *result = PULSAR_RESULT_OK;
    if (!g_sender_ready || client == NULL) {
        set_error(err, errlen, "the native sender is not initialised", NULL);
        return NULL;
    }
    pulsar_producer_configuration_t *conf = s_pulsar_producer_configuration_create();
    for (int i = 0; i < n; i++) {
        const psetting_t *found = NULL;
        for (size_t j = 0; j < N_PRODUCER_SETTINGS && found == NULL; j++)
            if (strcmp(PRODUCER_SETTINGS[j].name, names[i]) == 0) found = &PRODUCER_SETTINGS[j];
        if (found == NULL) {
            set_error(err, errlen, "unsupported producer setting: ", names[i]);
            s_pulsar_producer_configuration_free(conf);
            return NULL;
        }
        found->apply(conf, values[i]);
    }
    pulsar_producer_t *producer = NULL;
    pulsar_result res = s_pulsar_client_create_producer((pulsar_client_t *)client, topic, conf, &producer);
    s_pulsar_producer_configuration_free(conf);
    if (res != PULSAR_RESULT_OK) {
        *result = res;
        set_error(err, errlen, "cannot create a producer: ", p_pulsar_result_str(res));
        return NULL;
    }
    return producer;
}

PAR_EXPORT int64_t pns_producer_last_sequence_id(void *producer) {
    return s_pulsar_producer_get_last_sequence_id((pulsar_producer_t *)producer);
}

/* Blocks until what the producer holds is sent and answered (ctypes releases the GIL). */
PAR_EXPORT int pns_producer_flush(void *producer) { return s_pulsar_producer_flush((pulsar_producer_t *)producer); }

PAR_EXPORT void pns_producer_close(void *producer) {
    if (producer == NULL) return;
    s_pulsar_producer_close((pulsar_producer_t *)producer);
    s_pulsar_producer_free((pulsar_producer_t *)producer);
}

/* ---- one Arrow batch's columns, as Python hands them (writing/native_send.py builds these) ------------------ */
/* A string/binary column: validity bits (NULL: no nulls), int32 (wide == 0) or int64 offsets, the bytes; each
 * buffer's size in bytes; `offset` the array's first row in its buffers. `offsets == NULL`: the column is absent. */
typedef struct {
    const uint8_t *valid;
    const uint8_t *offsets;
    const uint8_t *data;
    int64_t valid_size, offsets_size, data_size;
    int64_t offset;
    int32_t wide, padding;
} pns_strings_t;

/* A fixed-width integer column (int32 partitions, int64 event times): values (NULL: absent), validity bits. */
typedef struct {
    const uint8_t *values;
    const uint8_t *valid;
    int64_t values_size, valid_size;
    int64_t offset;
} pns_ints_t;

/* A map<string,string> column: int32 offsets into its entries (`offsets == NULL`: absent), validity bits, and the
 * entries' keys and values (string columns indexed by those offsets). */
typedef struct {
    const uint8_t *offsets;
    const uint8_t *valid;
    int64_t offsets_size, valid_size;
    int64_t offset;
    pns_strings_t keys, values;
} pns_map_t;

typedef struct {
    int64_t rows;
    pns_strings_t value, key, ordering_key;
    pns_ints_t partition; /* int32: null or -1, the sink routes */
    pns_ints_t event_ms;  /* int64 epoch ms: null or 0, none */
    pns_map_t properties;
} pns_batch_t;

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
static int string_at(const pns_strings_t *c, int64_t row, const uint8_t **p, int64_t *len, int *ok) {
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
static int int_at(const pns_ints_t *c, int64_t row, int width, int64_t *v, int *ok) {
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
static int map_at(const pns_map_t *m, int64_t row, int64_t *first, int64_t *end, int *ok) {
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
static const char *properties_problem(const pns_map_t *m, int64_t row, int *ok) {
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
static int32_t java_string_hash(const uint8_t *s, int64_t n) {
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

/* ---- tasks -------------------------------------------------------------------------------------------------- */
#define PACE_BUCKETS 32

typedef struct pns_task pns_task_t;
typedef struct {
    pns_task_t *task;
    int32_t index;
    pulsar_producer_t *producer;
    int64_t last_persisted; /* effectivelyOnce: rows at or below this sequence id are skipped */
    int64_t confirmed;      /* under the task's lock */
} lane_t;

struct pns_task {
    pthread_mutex_t lock;
    pthread_cond_t answered_cond;
    int64_t refs;     /* under lock: Python's one, and one per unanswered send */
    int64_t sent;     /* under lock */
    int64_t answered; /* under lock, added to atomically: the pacing reads it without */
    int32_t error;    /* the first failed send's pulsar_result (0: none), under lock; read atomically */
    int32_t error_lane;
    int32_t waiting;
    int32_t lanes_n;
    int32_t partitions;      /* 0: not partitioned (one lane) */
    int32_t topic_partition; /* a partition named itself: its index, else -1 */
    int32_t single;          /* UseSinglePartition */
    int64_t next;            /* round robin */
    char *scratch[2]; /* a key (and a property's value) made C strings */
    int64_t scratch_cap[2];
    /* Pacing (pns_task_pace): no more sends in flight than the broker confirmed in the last window (a quarter of the
     * send timeout), at least pace_min; 0: no pacing. The bound is the task thread's, taken under the lock and kept
     * for an eighth of the window; the confirmations are counted in PACE_BUCKETS buckets spanning the window. */
    int64_t pace_window_ns;
    int64_t pace_min;
    int64_t pace_allowed;
    int64_t pace_until_ns;
    int64_t bucket_index[PACE_BUCKETS]; /* under lock: each bucket's time (now / bucket width) */
    int64_t bucket_count[PACE_BUCKETS]; /* under lock: the confirmations it holds */
    lane_t lanes[];
};

/* A task sending to a topic of `partitions` partitions (0: not partitioned; `topic_partition`: the index of a
 * partition named itself, else -1), round robin from `first_partition` (or only there, `single`). */
PAR_EXPORT void *pns_task_create(int32_t partitions, int32_t topic_partition, int64_t first_partition, int32_t single) {
    if (partitions < 0 || partitions > 1000000) return NULL;
    int32_t n = partitions > 0 ? partitions : 1;
    pns_task_t *t = calloc(1, sizeof *t + (size_t)n * sizeof(lane_t));
    if (t == NULL) return NULL;
    if (pthread_mutex_init(&t->lock, NULL) != 0) {
        free(t);
        return NULL;
    }
    pthread_cond_init(&t->answered_cond, NULL);
    t->refs = 1;
    t->lanes_n = n;
    t->partitions = partitions;
    t->topic_partition = topic_partition;
    t->single = single;
    t->next = first_partition;
    for (int32_t i = 0; i < n; i++) {
        t->lanes[i].task = t;
        t->lanes[i].index = i;
        t->lanes[i].last_persisted = -1;
    }
    return t;
}

static void task_release(pns_task_t *t) {
    pthread_mutex_lock(&t->lock);
    int64_t left = --t->refs;
    pthread_mutex_unlock(&t->lock);
    if (left > 0) return;
    pthread_cond_destroy(&t->answered_cond);
    pthread_mutex_destroy(&t->lock);
    free(t->scratch[0]);
    free(t->scratch[1]);
    free(t);
}

/* Python is done with the task; sends still unanswered keep it alive until their callbacks. */
PAR_EXPORT void pns_task_free(void *task) {
    if (task != NULL) task_release((pns_task_t *)task);
}

/* The producer of destination `lane` (its last persisted sequence id: effectivelyOnce's skip, else -1). */
PAR_EXPORT int pns_task_set_producer(void *task, int32_t lane, void *producer, int64_t last_persisted) {
    pns_task_t *t = task;
    if (t == NULL || lane < 0 || lane >= t->lanes_n) return -1;
    t->lanes[lane].producer = producer;
    t->lanes[lane].last_persisted = last_persisted;
    return 0;
}

PAR_EXPORT int64_t pns_task_next_partition(void *task) { return ((pns_task_t *)task)->next; }

/* Pace the task's sends to the broker's confirmations (writing/confirmations.py's rule, for the same reason: libpulsar
 * counts a send's timeout from when it enters the producer's queue, so a queue the broker drains slowly, under its
 * publish-rate policy, would time sends out): at most as many in flight as were confirmed in the last `window_ms`,
 * and at least `min_in_flight`. window_ms 0: no pacing (sends never time out). */
PAR_EXPORT int pns_task_pace(void *task, int64_t window_ms, int64_t min_in_flight) {
    pns_task_t *t = task;
    if (t == NULL || window_ms < 0 || min_in_flight < 1) return -1;
    t->pace_window_ns = window_ms * 1000000;
    t->pace_min = min_in_flight;
    t->pace_allowed = min_in_flight;
    t->pace_until_ns = 0;
    return 0;
}

static int64_t monotonic_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

/* A confirmation at `now` counted in its bucket (under the lock). */
static void count_confirmation(pns_task_t *t, int64_t now) {
    int64_t index = now / (t->pace_window_ns / PACE_BUCKETS + 1);
    int slot = (int)(index % PACE_BUCKETS);
    if (t->bucket_index[slot] != index) {
        t->bucket_index[slot] = index;
        t->bucket_count[slot] = 0;
    }
    t->bucket_count[slot]++;
}

/* Confirmations since `since` (under the lock), at least pace_min: the buckets wholly after it (a bucket's worth fewer
 * at most, so the bound errs on the slow side). */
static int64_t confirmed_since(const pns_task_t *t, int64_t since, int64_t now) {
    int64_t width = t->pace_window_ns / PACE_BUCKETS + 1;
    int64_t first = since <= 0 ? 0 : (since + width - 1) / width, last = now / width, n = 0;
    for (int i = 0; i < PACE_BUCKETS; i++)
        if (t->bucket_index[i] >= first && t->bucket_index[i] <= last) n += t->bucket_count[i];
    return n > t->pace_min ? n : t->pace_min;
}

/* The task's thread, before a send: wait until fewer are in flight than the broker confirmed in the last window (or a
 * send failed), then take the bound that holds for the next eighth of the window without the lock. */
static void pace(pns_task_t *t) {
    int64_t margin = t->pace_window_ns / 8, now;
    pthread_mutex_lock(&t->lock);
    t->waiting = 1;
    for (;;) {
        now = monotonic_ns();
        if (t->error != 0 || t->sent - t->answered < confirmed_since(t, now - t->pace_window_ns, now)) break;
        struct timespec until; /* an answer wakes it; the timeout only bounds a wait that one could miss */
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 100000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&t->answered_cond, &t->lock, &until);
    }
    t->waiting = 0;
    t->pace_allowed = confirmed_since(t, now - t->pace_window_ns + margin, now);
    t->pace_until_ns = now + margin;
    pthread_mutex_unlock(&t->lock);
}

static void on_sent(pulsar_result result, pulsar_message_id_t *id, void *ctx) {
    lane_t *lane = ctx;
    pns_task_t *t = lane->task;
    if (id != NULL) p_pulsar_message_id_free(id);
    pthread_mutex_lock(&t->lock);
    __atomic_add_fetch(&t->answered, 1, __ATOMIC_RELAXED); /* pns_send's pacing reads it without the lock */
    if (result == PULSAR_RESULT_OK) {
        lane->confirmed++;
        if (t->pace_window_ns) count_confirmation(t, monotonic_ns());
    } else if (t->error == 0) {
        __atomic_store_n(&t->error_lane, lane->index, __ATOMIC_RELAXED);
        __atomic_store_n(&t->error, result, __ATOMIC_RELEASE);
    }
    if (t->waiting) pthread_cond_broadcast(&t->answered_cond);
    pthread_mutex_unlock(&t->lock);
    task_release(t);
}

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
 * sequence_base >= 0 (effectivelyOnce; rows at or below their lane's last persisted id are skipped and counted in
 * *skipped), else the producer's own. Stops before the next row once a send failed. Returns the rows handed to
 * the producers; -1 when a lane has no producer or a buffer is too small (nothing is sent then). */
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
        if (sequence_id >= 0 && sequence_id <= lane->last_persisted) {
            (*skipped)++;
            continue;
        }
        if (t->pace_window_ns &&
            (t->sent - __atomic_load_n(&t->answered, __ATOMIC_RELAXED) >= t->pace_allowed || monotonic_ns() >= t->pace_until_ns)) {
            pace(t);
            if (__atomic_load_n(&t->error, __ATOMIC_ACQUIRE) != 0) break;
        }
        const uint8_t *p;
        int64_t len, ms;
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
        handed++;
    }
    return handed;
}

/* The task's answers so far. */
typedef struct {
    int64_t sent, answered;
    int32_t error, error_lane;
} pns_state_t;

/* Wait until every send is answered, or `timeout_ms` (< 0: without limit) passed; fills *state. */
PAR_EXPORT void pns_wait(void *task, int64_t timeout_ms, pns_state_t *state) {
    pns_task_t *t = task;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    if (timeout_ms >= 0) {
        until.tv_sec += timeout_ms / 1000;
        until.tv_nsec += (timeout_ms % 1000) * 1000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
    }
    pthread_mutex_lock(&t->lock);
    t->waiting = 1;
    while (t->answered < t->sent) {
        int rc = timeout_ms >= 0 ? pthread_cond_timedwait(&t->answered_cond, &t->lock, &until)
                                 : pthread_cond_wait(&t->answered_cond, &t->lock);
        if (rc != 0 && timeout_ms >= 0) break;
    }
    t->waiting = 0;
    state->sent = t->sent;
    state->answered = t->answered;
    state->error = t->error;
    state->error_lane = t->error_lane;
    pthread_mutex_unlock(&t->lock);
}

/* Messages the broker confirmed on destination `lane`. */
PAR_EXPORT int64_t pns_confirmed(void *task, int32_t lane) {
    pns_task_t *t = task;
    if (t == NULL || lane < 0 || lane >= t->lanes_n) return 0;
    pthread_mutex_lock(&t->lock);
    int64_t n = t->lanes[lane].confirmed;
    pthread_mutex_unlock(&t->lock);
    return n;
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
