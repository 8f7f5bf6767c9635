/*
 * fake_libpulsar.c: a stand-in for libpulsar's C API, for the conformance tests of the two read paths
 * (tests/unit/test_read_path_conformance.py) and of the two senders' effectivelyOnce batch cuts
 * (tests/unit/test_send_cuts_conformance.py). It has every symbol native/src/par_internal.h's SYMBOLS
 * and send_internal.h's SENDER_SYMBOLS list (par_load and pns_init resolve them all), one reader that
 * replays a scripted sequence: each read returns the next scripted message, or a timeout where the
 * script says so, then times out for good; and producers that batch as pulsar-client-cpp's do under
 * effectivelyOnce's settings (a batch sent when it holds batchingMaxMessages rows, or on a flush; its
 * messages answered then) and log every send and flush (fake_producer_log).
 *
 * Script it with fake_reset() and fake_push(); fake_live() counts the objects handed out and not
 * freed yet (messages, ids, configurations, clients, readers), so a test sees what the library
 * leaks or frees twice (under AddressSanitizer a double free aborts). Every copy is bounds checked.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define RESULT_OK 0
#define RESULT_TIMEOUT 3
#define RESULT_ERROR 1

typedef struct {
    uint8_t *id;      /* serialized MessageIdData */
    int id_len;
    uint8_t *data;
    uint32_t length;
    int timeout;      /* 1: this step is a read that times out */
} step_t;

typedef struct pulsar_message {
    step_t step;      /* a copy of the step's bytes, owned by the message */
    int64_t sequence_id, size; /* a message the sender built: its sequence id (-1: the producer's) and payload bytes */
} pulsar_message_t;

typedef struct pulsar_message_id {
    uint8_t *bytes;
    int len;
} pulsar_message_id_t;

typedef struct { int unused; } opaque_t;

static step_t *g_steps;
static int g_n, g_cap, g_next;
static long g_live;

static void *dup_bytes(const void *src, int64_t n) {
    if (n < 0 || n > INT32_MAX) return NULL;
    uint8_t *out = malloc(n > 0 ? (size_t)n : 1);
    if (out != NULL && n > 0) memcpy(out, src, (size_t)n);
    return out;
}

/* ---- the script ---------------------------------------------------------------------------------- */
void fake_reset(void) {
    for (int i = 0; i < g_n; i++) {
        free(g_steps[i].id);
        free(g_steps[i].data);
    }
    free(g_steps);
    g_steps = NULL;
    g_n = g_cap = g_next = 0;
}

/* A message (id and payload), or with timeout != 0 a read that times out. 0, or -1 out of memory. */
int fake_push(const uint8_t *id, int id_len, const uint8_t *data, int data_len, int timeout) {
    if (id_len < 0 || data_len < 0) return -1;
    if (g_n == g_cap) {
        int cap = g_cap > 0 ? g_cap * 2 : 16;
        step_t *grown = realloc(g_steps, (size_t)cap * sizeof *grown);
        if (grown == NULL) return -1;
        g_steps = grown;
        g_cap = cap;
    }
    step_t *s = &g_steps[g_n];
    memset(s, 0, sizeof *s);
    s->timeout = timeout != 0;
    if (!s->timeout) {
        s->id = dup_bytes(id, id_len);
        s->data = dup_bytes(data, data_len);
        if (s->id == NULL || s->data == NULL) {
            free(s->id);
            free(s->data);
            return -1;
        }
        s->id_len = id_len;
        s->length = (uint32_t)data_len;
    }
    g_n++;
    return 0;
}

/* Steps not read yet, and objects handed out and not freed. */
int fake_left(void) { return g_n - g_next; }
long fake_live(void) { return g_live; }

/* ---- clients, readers, configurations -------------------------------------------------------------- */
static void *new_opaque(void) {
    g_live++;
    return calloc(1, sizeof(opaque_t));
}
static void free_opaque(void *p) {
    if (p == NULL) return;
    g_live--;
    free(p);
}

void *pulsar_client_configuration_create(void) { return new_opaque(); }
void pulsar_client_configuration_free(void *c) { free_opaque(c); }
void pulsar_client_configuration_set_auth(void *c, void *a) { (void)c, (void)a; }
void pulsar_client_configuration_set_operation_timeout_seconds(void *c, int v) { (void)c, (void)v; }
void pulsar_client_configuration_set_io_threads(void *c, int v) { (void)c, (void)v; }
void pulsar_client_configuration_set_message_listener_threads(void *c, int v) { (void)c, (void)v; }
void pulsar_client_configuration_set_concurrent_lookup_request(void *c, int v) { (void)c, (void)v; }
void pulsar_client_configuration_set_logger(void *c, void *logger, void *ctx) { (void)c, (void)logger, (void)ctx; }
void pulsar_client_configuration_set_tls_trust_certs_file_path(void *c, const char *v) { (void)c, (void)v; }
void pulsar_client_configuration_set_tls_allow_insecure_connection(void *c, int v) { (void)c, (void)v; }
void pulsar_client_configuration_set_validate_hostname(void *c, int v) { (void)c, (void)v; }
void pulsar_client_configuration_set_tls_private_key_file_path(void *c, const char *v) { (void)c, (void)v; }
void pulsar_client_configuration_set_tls_certificate_file_path(void *c, const char *v) { (void)c, (void)v; }
void pulsar_client_configuration_set_stats_interval_in_seconds(void *c, unsigned int v) { (void)c, (void)v; }
void pulsar_client_configuration_set_listener_name(void *c, const char *v) { (void)c, (void)v; }
void *pulsar_authentication_create(const char *plugin, const char *params) { (void)plugin, (void)params; return new_opaque(); }
void pulsar_authentication_free(void *a) { free_opaque(a); }
void *pulsar_client_create(const char *url, const void *conf) { (void)url, (void)conf; return new_opaque(); }
int pulsar_client_close(void *c) { (void)c; return RESULT_OK; }
void pulsar_client_free(void *c) { free_opaque(c); }

typedef struct { int queue_size; } reader_conf_t;
void *pulsar_reader_configuration_create(void) {
    g_live++;
    return calloc(1, sizeof(reader_conf_t));
}
void pulsar_reader_configuration_free(void *c) {
    if (c == NULL) return;
    g_live--;
    free(c);
}
void pulsar_reader_configuration_set_receiver_queue_size(reader_conf_t *c, int v) { c->queue_size = v; }
int pulsar_reader_configuration_get_receiver_queue_size(reader_conf_t *c) { return c->queue_size; }
void pulsar_reader_configuration_set_reader_name(void *c, const char *v) { (void)c, (void)v; }
void pulsar_reader_configuration_set_subscription_role_prefix(void *c, const char *v) { (void)c, (void)v; }
void pulsar_reader_configuration_set_read_compacted(void *c, int v) { (void)c, (void)v; }
void pulsar_reader_configuration_set_default_crypto_key_reader(void *c, const char *a, const char *b) { (void)c, (void)a, (void)b; }
void pulsar_reader_configuration_set_crypto_failure_action(void *c, int v) { (void)c, (void)v; }

int pulsar_client_create_reader(void *client, const char *topic, const void *start, void *conf, void **reader) {
    (void)topic, (void)start, (void)conf;
    if (client == NULL || reader == NULL) return RESULT_ERROR;
    *reader = new_opaque();
    return *reader != NULL ? RESULT_OK : RESULT_ERROR;
}

int pulsar_reader_read_next_with_timeout(void *reader, pulsar_message_t **msg, int timeout_ms) {
    (void)timeout_ms;
    if (reader == NULL || msg == NULL) return RESULT_ERROR;
    if (g_next >= g_n) return RESULT_TIMEOUT;
    const step_t *s = &g_steps[g_next++];
    if (s->timeout) return RESULT_TIMEOUT;
    pulsar_message_t *m = calloc(1, sizeof *m);
    if (m == NULL) return RESULT_ERROR;
    m->step.id = dup_bytes(s->id, s->id_len);
    m->step.data = dup_bytes(s->data, s->length);
    if (m->step.id == NULL || m->step.data == NULL) {
        free(m->step.id);
        free(m->step.data);
        free(m);
        return RESULT_ERROR;
    }
    m->step.id_len = s->id_len;
    m->step.length = s->length;
    g_live++;
    *msg = m;
    return RESULT_OK;
}

int pulsar_reader_has_message_available(void *reader, int *available) {
    (void)reader;
    *available = g_next < g_n;
    return RESULT_OK;
}
int pulsar_reader_close(void *reader) { (void)reader; return RESULT_OK; }
void pulsar_reader_free(void *reader) { free_opaque(reader); }

/* ---- message ids ------------------------------------------------------------------------------------ */
static pulsar_message_id_t EARLIEST = {NULL, 0};
const pulsar_message_id_t *pulsar_message_id_earliest(void) { return &EARLIEST; }

static pulsar_message_id_t *new_id(const void *bytes, int64_t len) {
    pulsar_message_id_t *id = calloc(1, sizeof *id);
    if (id == NULL) return NULL;
    id->bytes = dup_bytes(bytes, len);
    if (id->bytes == NULL) {
        free(id);
        return NULL;
    }
    id->len = (int)len;
    g_live++;
    return id;
}

pulsar_message_id_t *pulsar_message_id_deserialize(const void *bytes, uint32_t len) { return new_id(bytes, len); }

/* As libpulsar: a malloc()ed copy the caller frees with free(). */
void *pulsar_message_id_serialize(pulsar_message_id_t *id, int *len) {
    if (id == NULL || len == NULL) return NULL;
    *len = id->len;
    return dup_bytes(id->bytes, id->len);
}

void pulsar_message_id_free(pulsar_message_id_t *id) {
    if (id == NULL || id == &EARLIEST) return;
    g_live--;
    free(id->bytes);
    free(id);
}

/* ---- messages --------------------------------------------------------------------------------------- */
void pulsar_message_free(pulsar_message_t *m) {
    if (m == NULL) return;
    g_live--;
    free(m->step.id);
    free(m->step.data);
    free(m);
}
const void *pulsar_message_get_data(pulsar_message_t *m) { return m->step.data; }
uint32_t pulsar_message_get_length(pulsar_message_t *m) { return m->step.length; }
pulsar_message_id_t *pulsar_message_get_message_id(pulsar_message_t *m) { return new_id(m->step.id, m->step.id_len); }
const char *pulsar_message_get_partitionKey(pulsar_message_t *m) { (void)m; return ""; }
const char *pulsar_message_get_orderingKey(pulsar_message_t *m) { (void)m; return ""; }
uint64_t pulsar_message_get_publish_timestamp(pulsar_message_t *m) { (void)m; return 1700000000000ULL; }
uint64_t pulsar_message_get_event_timestamp(pulsar_message_t *m) { (void)m; return 0; }
const char *pulsar_message_get_producer_name(pulsar_message_t *m) { (void)m; return "p"; }
int pulsar_message_has_null_value(pulsar_message_t *m) { (void)m; return 0; }
int pulsar_message_has_schema_version(pulsar_message_t *m) { (void)m; return 0; }
const char *pulsar_message_get_schemaVersion(pulsar_message_t *m) { (void)m; return NULL; }
void *pulsar_message_get_properties(pulsar_message_t *m) { (void)m; return NULL; }
int pulsar_string_map_size(void *map) { (void)map; return 0; }
const char *pulsar_string_map_get_key(void *map, int i) { (void)map, (void)i; return NULL; }
const char *pulsar_string_map_get_value(void *map, int i) { (void)map, (void)i; return NULL; }
void pulsar_string_map_free(void *map) { (void)map; }
const char *pulsar_result_str(int result) { return result == RESULT_TIMEOUT ? "TimeOut" : result == RESULT_OK ? "Ok" : "UnknownError"; }

/* ---- producers (the sender's symbols) ----------------------------------------------------------------- */
typedef void (*send_callback)(int, pulsar_message_id_t *, void *);
typedef void (*flush_callback)(int, void *);

typedef struct {
    int batching;
    unsigned int max_messages;
} producer_conf_t;

typedef struct {
    send_callback callback;
    void *ctx;
} waiting_t;

/* A producer: its open batch (the sends waiting for it to be sent) and its log, FAKE_LOG_FIELDS int64 per event:
 * kind (0: a send, 1: a flush_async), the message's sequence id, its payload bytes, and the batch it is in (sends:
 * the producer's batches are numbered from 0; a flush: the batches sent before it). */
#define FAKE_LOG_FIELDS 4
typedef struct pulsar_producer {
    int batching;
    int64_t max_messages, batches;
    waiting_t *open;
    int64_t open_n, open_cap;
    int64_t *log;
    int64_t log_n, log_cap; /* events */
} pulsar_producer_t;

void *pulsar_producer_configuration_create(void) {
    producer_conf_t *c = calloc(1, sizeof *c);
    if (c == NULL) return NULL;
    c->batching = 1; /* libpulsar's defaults */
    c->max_messages = 1000;
    g_live++;
    return c;
}
void pulsar_producer_configuration_free(producer_conf_t *c) {
    if (c == NULL) return;
    g_live--;
    free(c);
}
void pulsar_producer_configuration_set_batching_enabled(producer_conf_t *c, int v) { c->batching = v; }
void pulsar_producer_configuration_set_batching_max_messages(producer_conf_t *c, unsigned int v) { c->max_messages = v; }
void pulsar_producer_configuration_set_producer_name(void *c, const char *v) { (void)c, (void)v; }
void pulsar_producer_configuration_set_send_timeout(void *c, int v) { (void)c, (void)v; }
void pulsar_producer_configuration_set_compression_type(void *c, int v) { (void)c, (void)v; }
void pulsar_producer_configuration_set_max_pending_messages(void *c, int v) { (void)c, (void)v; }
void pulsar_producer_configuration_set_max_pending_messages_across_partitions(void *c, int v) { (void)c, (void)v; }
void pulsar_producer_configuration_set_block_if_queue_full(void *c, int v) { (void)c, (void)v; }
void pulsar_producer_configuration_set_batching_max_allowed_size_in_bytes(void *c, unsigned long v) { (void)c, (void)v; }
void pulsar_producer_configuration_set_batching_max_publish_delay_ms(void *c, unsigned long v) { (void)c, (void)v; }
void pulsar_producer_configuration_set_chunking_enabled(void *c, int v) { (void)c, (void)v; }
void pulsar_producer_configuration_set_lazy_start_partitioned_producers(void *c, int v) { (void)c, (void)v; }
void pulsar_producer_configuration_set_access_mode(void *c, int v) { (void)c, (void)v; }

int pulsar_client_create_producer(void *client, const char *topic, const producer_conf_t *conf, pulsar_producer_t **out) {
    (void)topic;
    if (client == NULL || conf == NULL || out == NULL) return RESULT_ERROR;
    pulsar_producer_t *p = calloc(1, sizeof *p);
    if (p == NULL) return RESULT_ERROR;
    p->batching = conf->batching;
    p->max_messages = conf->max_messages;
    g_live++;
    *out = p;
    return RESULT_OK;
}

static int grow(void **items, int64_t *cap, int64_t need, size_t item) {
    if (need <= *cap) return 0;
    int64_t n = *cap > 0 ? *cap * 2 : 64;
    while (n < need) n *= 2;
    void *grown = realloc(*items, (size_t)n * item);
    if (grown == NULL) return -1;
    *items = grown;
    *cap = n;
    return 0;
}

static void log_event(pulsar_producer_t *p, int64_t kind, int64_t sequence_id, int64_t size) {
    if (grow((void **)&p->log, &p->log_cap, p->log_n + 1, FAKE_LOG_FIELDS * sizeof(int64_t)) != 0) abort();
    int64_t *e = &p->log[p->log_n++ * FAKE_LOG_FIELDS];
    e[0] = kind;
    e[1] = sequence_id;
    e[2] = size;
    e[3] = p->batches;
}

/* The open batch sent and answered (`result`): each of its messages' callbacks. */
static void end_batch(pulsar_producer_t *p, int result) {
    if (p->open_n == 0) return;
    int64_t n = p->open_n;
    p->open_n = 0;
    p->batches++;
    for (int64_t i = 0; i < n; i++) p->open[i].callback(result, result == RESULT_OK ? new_id("", 0) : NULL, p->open[i].ctx);
}

void pulsar_producer_send_async(pulsar_producer_t *p, pulsar_message_t *m, send_callback callback, void *ctx) {
    log_event(p, 0, m->sequence_id, m->size);
    if (grow((void **)&p->open, &p->open_cap, p->open_n + 1, sizeof(waiting_t)) != 0) abort();
    p->open[p->open_n++] = (waiting_t){callback, ctx};
    if (!p->batching || p->open_n >= p->max_messages) end_batch(p, RESULT_OK);
}
void pulsar_producer_flush_async(pulsar_producer_t *p, flush_callback callback, void *ctx) {
    log_event(p, 1, -1, 0);
    end_batch(p, RESULT_OK);
    callback(RESULT_OK, ctx);
}
int pulsar_producer_flush(pulsar_producer_t *p) {
    end_batch(p, RESULT_OK);
    return RESULT_OK;
}
int64_t pulsar_producer_get_last_sequence_id(pulsar_producer_t *p) { (void)p; return -1; }
/* As libpulsar's close: the open batch is failed, not sent. */
int pulsar_producer_close(pulsar_producer_t *p) {
    end_batch(p, RESULT_ERROR);
    return RESULT_OK;
}
void pulsar_producer_free(pulsar_producer_t *p) {
    if (p == NULL) return;
    g_live--;
    free(p->open);
    free(p->log);
    free(p);
}

/* The producer's log (FAKE_LOG_FIELDS int64 per event) into `out` (`cap` int64): the events copied, or -1 when `out` is
 * too small for them all. */
int64_t fake_producer_log(const pulsar_producer_t *p, int64_t *out, int64_t cap) {
    if (p == NULL || out == NULL || cap < p->log_n * FAKE_LOG_FIELDS) return -1;
    if (p->log_n > 0) memcpy(out, p->log, (size_t)(p->log_n * FAKE_LOG_FIELDS) * sizeof(int64_t));
    return p->log_n;
}
/* The sends in the producer's open batch (not answered yet). */
int64_t fake_producer_open(const pulsar_producer_t *p) { return p == NULL ? -1 : p->open_n; }

/* Messages the sender builds: the payload is read whole (AddressSanitizer sees a read past it) and its size kept. */
static int64_t g_payload_sum; /* what reading the payloads adds up: keeps the reads */
pulsar_message_t *pulsar_message_create(void) {
    pulsar_message_t *m = calloc(1, sizeof *m);
    if (m == NULL) return NULL;
    m->sequence_id = -1;
    g_live++;
    return m;
}
static void read_payload(pulsar_message_t *m, const void *data, size_t size) {
    const uint8_t *bytes = data;
    for (size_t i = 0; i < size; i++) g_payload_sum += bytes[i];
    m->size = (int64_t)size;
}
void pulsar_message_set_content(pulsar_message_t *m, const void *data, size_t size) { read_payload(m, data, size); }
void pulsar_message_set_allocated_content(pulsar_message_t *m, void *data, size_t size) { read_payload(m, data, size); }
void pulsar_message_set_sequence_id(pulsar_message_t *m, int64_t id) { m->sequence_id = id; }
void pulsar_message_set_partition_key(pulsar_message_t *m, const char *v) { (void)m, (void)v; }
void pulsar_message_set_ordering_key(pulsar_message_t *m, const char *v) { (void)m, (void)v; }
void pulsar_message_set_event_timestamp(pulsar_message_t *m, uint64_t v) { (void)m, (void)v; }
void pulsar_message_set_property(pulsar_message_t *m, const char *k, const char *v) { (void)m, (void)k, (void)v; }
