/*
 * send_internal.h: the sink's native sender (writing/native_sender.py, native_task.py): one Arrow record batch's
 * rows sent through libpulsar's C API, one pulsar_producer_send_async per row, the broker's answers counted by a C
 * callback.
 *
 * Why: the Python sender pays a Python callback per message on the client's I/O thread (it takes the GIL from the
 * task's thread each time: two thirds of a write task's CPU, bench/README.md "jvm_sink"). Here the callback is C:
 * it counts confirmations per destination and keeps the first error, under a mutex, and the task's thread waits
 * for all of them in pns_wait. Python keeps what is not per row: the options, the producers' lifetimes, quotas,
 * the effectively-once skip's inputs (each producer's last persisted sequence id) and the errors' wording.
 *
 * A task (pns_task_t) holds the destinations (one producer per partition, set by Python once opened), the round
 * robin's next partition and the answers. One batch is first routed (pns_route: every row's destination, and
 * whether the batch holds anything the sender does not encode), then sent (pns_send). Every buffer read is bounds
 * checked against the sizes Python passes (the Arrow buffers' own); a bad buffer is refused, never read past. The
 * values a pns_send call sends are copied once into a block its messages point into (sending.c: payloads), so no
 * Arrow buffer is read after the call returns and no payload is allocated per message.
 *
 * Pacing: a task keeps no more sends in flight than the broker confirmed lately (pns_task_pace), as the Python sender
 * does, so a send waits its turn in pns_send rather than in the producer's queue, where its timeout would run.
 *
 * Lifetime: a send's callback may come after the task gave up waiting (a send timeout fails it later), so the
 * task is reference counted: one reference for Python, one per unanswered send; the last one frees it.
 *
 * The producer symbols are resolved after par_load, optionally: a libpulsar without one of them leaves the reader
 * working and the sink on its Python sender (pns_init names the symbol).
 *
 * Its files (this header is what they share; not installed):
 *   send_producers.c  the producer symbols of libpulsar (pns_init), the settings Python reads, producers
 *   send_columns.c    one Arrow batch's columns read row by row, bounds checked; the Java key hash
 *   send_tasks.c      a task's lifetime, its pacing and the broker's answers (the C callback, pns_wait)
 *   sending.c         a batch's rows routed (pns_route) and sent (pns_send)
 */
#ifndef SEND_INTERNAL_H
#define SEND_INTERNAL_H

#include <pthread.h>
#include <stddef.h>

#include "par_internal.h"

typedef struct pulsar_producer pulsar_producer_t;
typedef struct pulsar_producer_configuration pulsar_producer_configuration_t;
typedef void (*pulsar_send_callback)(pulsar_result, pulsar_message_id_t *, void *);
typedef void (*pulsar_flush_callback)(pulsar_result, void *);

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
    X(void, pulsar_producer_flush_async, (pulsar_producer_t *, pulsar_flush_callback, void *))                    \
    X(pulsar_result, pulsar_producer_close, (pulsar_producer_t *))                                                \
    X(void, pulsar_producer_free, (pulsar_producer_t *))                                                          \
    X(pulsar_message_t *, pulsar_message_create, (void))                                                          \
    X(void, pulsar_message_set_content, (pulsar_message_t *, const void *, size_t))                               \
    X(void, pulsar_message_set_allocated_content, (pulsar_message_t *, void *, size_t))                           \
    X(void, pulsar_message_set_partition_key, (pulsar_message_t *, const char *))                                 \
    X(void, pulsar_message_set_ordering_key, (pulsar_message_t *, const char *))                                  \
    X(void, pulsar_message_set_event_timestamp, (pulsar_message_t *, uint64_t))                                   \
    X(void, pulsar_message_set_sequence_id, (pulsar_message_t *, int64_t))                                       \
    X(void, pulsar_message_set_property, (pulsar_message_t *, const char *, const char *))

#define S_DECLARE(ret, name, args) extern ret(*s_##name) args;
SENDER_SYMBOLS(S_DECLARE)
#undef S_DECLARE
/* Optional (newer libpulsar): a message without payload. Without it a batch with a null value goes to Python. */
extern void (*s_set_null_value)(pulsar_message_t *);

/* ---- one Arrow batch's columns, as Python hands them (writing/native_sender.py builds these) ------------------ */
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

/* send_columns.c: a row's value in a column (0: null or absent; *ok = 0 when a buffer is too small for it). */
int string_at(const pns_strings_t *c, int64_t row, const uint8_t **p, int64_t *len, int *ok);
int int_at(const pns_ints_t *c, int64_t row, int width, int64_t *v, int *ok);
int map_at(const pns_map_t *m, int64_t row, int64_t *first, int64_t *end, int *ok);
const char *properties_problem(const pns_map_t *m, int64_t row, int *ok);
int32_t java_string_hash(const uint8_t *s, int64_t n);

/* ---- tasks (send_tasks.c) ------------------------------------------------------------------------------------ */
#define PACE_BUCKETS 32

typedef struct pns_task pns_task_t;
/* Memory a send may still be read from after its failed answer (sending.c's payloads): kept until the task is freed. */
typedef struct kept {
    struct kept *next;
} kept_t;
typedef struct {
    pns_task_t *task;
    int32_t index;
    pulsar_producer_t *producer;
    int64_t last_persisted; /* effectivelyOnce: the first id of the last batch the broker holds (lane_place) */
    int64_t confirmed;      /* under the task's lock */
    /* effectivelyOnce's batch cuts (lane_place; writing/batch_cuts.py's rule): the open batch's rows, payload bytes,
     * first sequence id, and its rows handed to the producer (the task thread's only) */
    int64_t cut_count, cut_bytes, cut_first, held;
} lane_t;

struct pns_task {
    pthread_mutex_t lock;
    pthread_cond_t answered_cond;
    int64_t refs;     /* under lock: Python's one, and one per unanswered send */
    int64_t sent;     /* the task's thread's alone (pns_send counts, pns_wait and the pacing read it there) */
    int64_t answered; /* under lock, added to atomically: the pacing reads it without */
    int32_t error;    /* the first failed send's pulsar_result (0: none), under lock; read atomically */
    int32_t error_lane;
    int32_t waiting;
    int32_t lanes_n;
    int32_t partitions;      /* 0: not partitioned (one lane) */
    int32_t topic_partition; /* a partition named itself: its index, else -1 */
    int32_t single;          /* UseSinglePartition */
    int64_t next;            /* round robin */
    int64_t cut_messages;    /* effectivelyOnce: a batch's rows at most (0: no cuts of the sender's) */
    int64_t cut_bytes;       /* and the payload bytes after which it is cut */
    int64_t held;            /* rows handed to producers in batches not cut yet (task thread): not in flight */
    char *scratch[2]; /* a key (and a property's value) made C strings */
    kept_t *kept;     /* under lock: freed with the task */
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

/* The task's answers so far. */
typedef struct {
    int64_t sent, answered;
    int32_t error, error_lane;
} pns_state_t;

/* send_tasks.c: what sending.c does per send: wait for the pace, and the callback that counts an answer. */
int64_t monotonic_ns(void);
void pace(pns_task_t *t);
void on_sent(pulsar_result result, pulsar_message_id_t *id, void *ctx);
/* effectivelyOnce: place the lane's next row (sequence id, payload bytes) in its batches; 1 when it is skipped, and
 * *cut set when the sender must end the batch after sending it (a flush); *closes: the row ends its batch. A row sent
 * is counted by lane_sent after the send (before it, the rows of its batch wait for it, not for the broker). */
int lane_place(pns_task_t *t, lane_t *lane, int64_t sequence_id, int64_t size, int *cut, int *closes);
void lane_sent(pns_task_t *t, lane_t *lane, int closes);
void flushed(pulsar_result result, void *ctx);

#endif
