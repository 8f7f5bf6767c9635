/*
 * pulsar_arrow_reader: fills the columns of an Arrow record batch from a Pulsar reader, one entry
 * (a producer's batch) per call, with no Python object per message.
 *
 * One job: read messages through libpulsar's C API and append their fields to column buffers.
 * Everything about ranges, quotas and planning stays in Python (reading/native_read.py): this
 * library only reports, per call, which entry the messages it appended belong to.
 *
 * libpulsar is the copy the pulsar-client wheel ships (pulsar_client.libs/libpulsar-<hash>.so),
 * loaded with dlopen by path and resolved symbol by symbol, so a wheel without one of them is
 * refused at load (par_load names the symbol) and the caller falls back to the Python path. One
 * C++ member the C API does not wrap (a reader's inclusive start) is resolved too, optionally.
 * The library is plain C (no Python headers): Python calls it through ctypes, which releases
 * the GIL for every call.
 *
 * Every buffer write is bounds checked (buf_reserve); every protobuf read is bounds checked
 * (parse_id). Tests run it under AddressSanitizer (tests/integration/test_native_read.py).
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAR_EXPORT __attribute__((visibility("default")))

/* ---- the C API of libpulsar, declared as the headers include/pulsar/c/ of pulsar-client-cpp declares it -- */
typedef struct pulsar_client pulsar_client_t;
typedef struct pulsar_client_configuration pulsar_client_configuration_t;
typedef struct pulsar_reader pulsar_reader_t;
typedef struct pulsar_reader_configuration pulsar_reader_configuration_t;
typedef struct pulsar_message pulsar_message_t;
typedef struct pulsar_message_id pulsar_message_id_t;
typedef struct pulsar_string_map pulsar_string_map_t;
typedef struct pulsar_authentication pulsar_authentication_t;
typedef int pulsar_result;
typedef void (*pulsar_logger)(int level, const char *file, int line, const char *message, void *ctx);

#define PULSAR_RESULT_OK 0
#define PULSAR_RESULT_TIMEOUT 3
#define PULSAR_LOG_WARN 2

#define SYMBOLS(X)                                                                                    \
    X(pulsar_client_configuration_t *, pulsar_client_configuration_create, (void))                    \
    X(void, pulsar_client_configuration_free, (pulsar_client_configuration_t *))                      \
    X(void, pulsar_client_configuration_set_auth, (pulsar_client_configuration_t *, pulsar_authentication_t *)) \
    X(void, pulsar_client_configuration_set_operation_timeout_seconds, (pulsar_client_configuration_t *, int)) \
    X(void, pulsar_client_configuration_set_io_threads, (pulsar_client_configuration_t *, int))      \
    X(void, pulsar_client_configuration_set_message_listener_threads, (pulsar_client_configuration_t *, int)) \
    X(void, pulsar_client_configuration_set_concurrent_lookup_request, (pulsar_client_configuration_t *, int)) \
    X(void, pulsar_client_configuration_set_logger, (pulsar_client_configuration_t *, pulsar_logger, void *)) \
    X(void, pulsar_client_configuration_set_tls_trust_certs_file_path, (pulsar_client_configuration_t *, const char *)) \
    X(void, pulsar_client_configuration_set_tls_allow_insecure_connection, (pulsar_client_configuration_t *, int)) \
    X(void, pulsar_client_configuration_set_validate_hostname, (pulsar_client_configuration_t *, int)) \
    X(void, pulsar_client_configuration_set_tls_private_key_file_path, (pulsar_client_configuration_t *, const char *)) \
    X(void, pulsar_client_configuration_set_tls_certificate_file_path, (pulsar_client_configuration_t *, const char *)) \
    X(void, pulsar_client_configuration_set_stats_interval_in_seconds, (pulsar_client_configuration_t *, unsigned int)) \
    X(void, pulsar_client_configuration_set_listener_name, (pulsar_client_configuration_t *, const char *)) \
    X(pulsar_authentication_t *, pulsar_authentication_create, (const char *, const char *))          \
    X(void, pulsar_authentication_free, (pulsar_authentication_t *))                                  \
    X(pulsar_client_t *, pulsar_client_create, (const char *, const pulsar_client_configuration_t *)) \
    X(pulsar_result, pulsar_client_close, (pulsar_client_t *))                                        \
    X(void, pulsar_client_free, (pulsar_client_t *))                                                  \
    X(pulsar_reader_configuration_t *, pulsar_reader_configuration_create, (void))                    \
    X(void, pulsar_reader_configuration_free, (pulsar_reader_configuration_t *))                      \
    X(void, pulsar_reader_configuration_set_receiver_queue_size, (pulsar_reader_configuration_t *, int)) \
    X(int, pulsar_reader_configuration_get_receiver_queue_size, (pulsar_reader_configuration_t *))      \
    X(void, pulsar_reader_configuration_set_reader_name, (pulsar_reader_configuration_t *, const char *)) \
    X(void, pulsar_reader_configuration_set_subscription_role_prefix, (pulsar_reader_configuration_t *, const char *)) \
    X(void, pulsar_reader_configuration_set_read_compacted, (pulsar_reader_configuration_t *, int))  \
    X(void, pulsar_reader_configuration_set_default_crypto_key_reader, (pulsar_reader_configuration_t *, const char *, const char *)) \
    X(void, pulsar_reader_configuration_set_crypto_failure_action, (pulsar_reader_configuration_t *, int)) \
    X(pulsar_result, pulsar_client_create_reader, (pulsar_client_t *, const char *, const pulsar_message_id_t *, pulsar_reader_configuration_t *, pulsar_reader_t **)) \
    X(pulsar_result, pulsar_reader_read_next_with_timeout, (pulsar_reader_t *, pulsar_message_t **, int)) \
    X(pulsar_result, pulsar_reader_has_message_available, (pulsar_reader_t *, int *))                \
    X(pulsar_result, pulsar_reader_close, (pulsar_reader_t *))                                        \
    X(void, pulsar_reader_free, (pulsar_reader_t *))                                                  \
    X(const pulsar_message_id_t *, pulsar_message_id_earliest, (void))                                \
    X(pulsar_message_id_t *, pulsar_message_id_deserialize, (const void *, uint32_t))                 \
    X(void *, pulsar_message_id_serialize, (pulsar_message_id_t *, int *))                            \
    X(void, pulsar_message_id_free, (pulsar_message_id_t *))                                          \
    X(void, pulsar_message_free, (pulsar_message_t *))                                                \
    X(const void *, pulsar_message_get_data, (pulsar_message_t *))                                    \
    X(uint32_t, pulsar_message_get_length, (pulsar_message_t *))                                      \
    X(pulsar_message_id_t *, pulsar_message_get_message_id, (pulsar_message_t *))                     \
    X(const char *, pulsar_message_get_partitionKey, (pulsar_message_t *))                            \
    X(const char *, pulsar_message_get_orderingKey, (pulsar_message_t *))                             \
    X(uint64_t, pulsar_message_get_publish_timestamp, (pulsar_message_t *))                           \
    X(uint64_t, pulsar_message_get_event_timestamp, (pulsar_message_t *))                             \
    X(const char *, pulsar_message_get_producer_name, (pulsar_message_t *))                           \
    X(int, pulsar_message_has_null_value, (pulsar_message_t *))                                       \
    X(int, pulsar_message_has_schema_version, (pulsar_message_t *))                                   \
    X(const char *, pulsar_message_get_schemaVersion, (pulsar_message_t *))                           \
    X(pulsar_string_map_t *, pulsar_message_get_properties, (pulsar_message_t *))                     \
    X(int, pulsar_string_map_size, (pulsar_string_map_t *))                                          \
    X(const char *, pulsar_string_map_get_key, (pulsar_string_map_t *, int))                          \
    X(const char *, pulsar_string_map_get_value, (pulsar_string_map_t *, int))                        \
    X(void, pulsar_string_map_free, (pulsar_string_map_t *))                                         \
    X(const char *, pulsar_result_str, (pulsar_result))

#define DECLARE(ret, name, args) static ret(*p_##name) args;
SYMBOLS(DECLARE)
#undef DECLARE

static void *g_lib;

/* Optional: pulsar::ReaderConfiguration::setStartMessageIdInclusive, which the C API does not wrap.
 * A reader that starts exclusively after the entry before its range has the broker read that entry
 * for nothing (a bookie read per reader opened on a backlog). The C API's reader configuration is a
 * struct whose only member is that C++ object (pulsar-client-cpp lib/c/c_structs.h:
 * struct _pulsar_reader_configuration { pulsar::ReaderConfiguration conf; }), so its address is the
 * object's, which the member function takes as its first argument (Itanium C++ ABI). Without the
 * symbol, par_inclusive_start_supported says so and readers start exclusively. */
#define SET_INCLUSIVE_SYMBOL "_ZN6pulsar19ReaderConfiguration26setStartMessageIdInclusiveEb"
#define IS_INCLUSIVE_SYMBOL "_ZNK6pulsar19ReaderConfiguration25isStartMessageIdInclusiveEv"
#define GET_QUEUE_SYMBOL "_ZNK6pulsar19ReaderConfiguration20getReceiverQueueSizeEv"
static void *(*p_set_start_inclusive)(pulsar_reader_configuration_t *, _Bool);

/* Whether the C++ members see the C API's configuration as their object: a queue size set through
 * the C API reads back through the C++ getter, and the inclusive flag sets and reads back, the C
 * API's own getter unchanged. Any other layout (a libpulsar of another shape) leaves readers
 * exclusive rather than writing into memory this library does not know. */
static int inclusive_start_checks(void *lib) {
    _Bool (*is_inclusive)(pulsar_reader_configuration_t *) = NULL;
    int (*get_queue)(pulsar_reader_configuration_t *) = NULL;
    *(void **)(&is_inclusive) = dlsym(lib, IS_INCLUSIVE_SYMBOL);
    *(void **)(&get_queue) = dlsym(lib, GET_QUEUE_SYMBOL);
    if (p_set_start_inclusive == NULL || is_inclusive == NULL || get_queue == NULL) return 0;
    pulsar_reader_configuration_t *conf = p_pulsar_reader_configuration_create();
    if (conf == NULL) return 0;
    p_pulsar_reader_configuration_set_receiver_queue_size(conf, 4321);
    int ok = get_queue(conf) == 4321 && !is_inclusive(conf);
    if (ok) {
        p_set_start_inclusive(conf, 1);
        ok = is_inclusive(conf) && p_pulsar_reader_configuration_get_receiver_queue_size(conf) == 4321;
    }
    p_pulsar_reader_configuration_free(conf);
    return ok;
}

static void set_error(char *err, size_t errlen, const char *text, const char *detail) {
    if (err != NULL && errlen > 0) snprintf(err, errlen, "%s%s", text, detail != NULL ? detail : "");
}

/* Resolve every symbol of libpulsar's C API this library calls. 0 on success; else -1 and `err`
 * names the file or the first missing symbol. Safe to call again with the same path. */
PAR_EXPORT int par_load(const char *libpulsar_path, char *err, size_t errlen) {
    if (g_lib != NULL) return 0;
    void *lib = dlopen(libpulsar_path, RTLD_NOW | RTLD_GLOBAL);
    if (lib == NULL) {
        set_error(err, errlen, "cannot load libpulsar: ", dlerror());
        return -1;
    }
#define RESOLVE(ret, name, args)                                      \
    *(void **)(&p_##name) = dlsym(lib, #name);                        \
    if (p_##name == NULL) {                                           \
        set_error(err, errlen, "libpulsar lacks the symbol ", #name); \
        dlclose(lib);                                                 \
        return -1;                                                    \
    }
    SYMBOLS(RESOLVE)
#undef RESOLVE
    *(void **)(&p_set_start_inclusive) = dlsym(lib, SET_INCLUSIVE_SYMBOL);
    if (!inclusive_start_checks(lib)) p_set_start_inclusive = NULL; /* NULL: exclusive starts only */
    g_lib = lib;
    return 0;
}

/* 1 when readers can start at their first entry inclusively (setting start_message_id_inclusive). */
PAR_EXPORT int par_inclusive_start_supported(void) { return p_set_start_inclusive != NULL; }

PAR_EXPORT const char *par_result_str(int result) {
    return p_pulsar_result_str != NULL ? p_pulsar_result_str(result) : "libpulsar not loaded";
}

/* ---- growable buffers -------------------------------------------------------------------------- */
typedef struct {
    uint8_t *data;
    int64_t len;
    int64_t cap;
} buf_t;

static int buf_reserve(buf_t *b, int64_t extra) {
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
/* A variable-width column (utf8/binary): validity bits, int32 offsets (rows + 1), bytes. */
typedef struct {
    buf_t valid, offsets, data;
} varcol_t;

enum { COL_KEY, COL_VALUE, COL_ID, COL_ORDERING, COL_PRODUCER, COL_PROP_KEY, COL_PROP_VALUE, N_VARCOLS };

typedef struct {
    int64_t rows;
    int64_t props;      /* property entries in all rows */
    varcol_t var[N_VARCOLS];
    buf_t publish_us;   /* int64 */
    buf_t event_valid;  /* bits */
    buf_t event_us;     /* int64 */
    buf_t prop_offsets; /* int32, rows + 1: each row's first property entry */
    buf_t schema_version; /* int64, -1 when the message has none */
} columns_t;

static int varcol_init(varcol_t *c) { return c->offsets.len == 0 ? buf_i32(&c->offsets, 0) : 0; }

static int varcol_push(varcol_t *c, int64_t row, const void *bytes, int64_t n, int valid) {
    int64_t end = (int64_t)buf_i32_at(&c->offsets, (c->offsets.len / 4) - 1) + n;
    if (end > INT32_MAX) return -1; /* the caller starts a new batch before this can happen */
    if (bit_set(&c->valid, row, valid) != 0) return -1;
    if (buf_append(&c->data, bytes, n) != 0) return -1;
    return buf_i32(&c->offsets, (int32_t)end);
}

static int columns_init(columns_t *c) {
    for (int i = 0; i < N_VARCOLS; i++)
        if (varcol_init(&c->var[i]) != 0) return -1;
    return c->prop_offsets.len == 0 ? buf_i32(&c->prop_offsets, 0) : 0;
}

static void columns_free(columns_t *c) {
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
static void columns_truncate(columns_t *c, int64_t rows) {
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

/* ---- message ids: MessageIdData protobuf ------------------------------------------------------- */
typedef struct {
    int64_t ledger, entry;
    int32_t batch_index; /* -1: not batched */
    int32_t batch_size;  /* 0: unknown */
    int64_t first_chunk_ledger, first_chunk_entry; /* -1: not a chunked message */
} msg_id_t;

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
static int parse_id(const uint8_t *p, int64_t n, msg_id_t *id, int nested) {
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

/* ---- clients ----------------------------------------------------------------------------------- */
static void log_warnings(int level, const char *file, int line, const char *message, void *ctx) {
    (void)ctx;
    if (level >= PULSAR_LOG_WARN)
        fprintf(stderr, "%s pulsar-client %s:%d %s\n", level > PULSAR_LOG_WARN ? "ERROR" : "WARN", file, line, message);
}

/* The plugin names pulsar-client-cpp builds in (AuthFactory's tryCreateBuiltinAuth). */
static int is_builtin_auth_plugin(const char *name) {
    static const char *const builtin[] = {"token", "tls", "oauth2token", "basic", "athenz"};
    for (size_t i = 0; i < sizeof builtin / sizeof builtin[0]; i++)
        if (strcmp(name, builtin[i]) == 0) return 1;
    return 0;
}

/* ---- settings: one table per configuration, which Python reads (par_setting_name) ------------- */
/* The pulsar.Client / create_reader keyword names a user may pass through (pulsar.client.*,
 * pulsar.reader.*) that this library can apply; any other keeps a query on the Python path. */
typedef struct {
    const char *name;
    void (*apply)(void *conf, const char *value);
} setting_t;

static void c_operation_timeout(void *c, const char *v) { p_pulsar_client_configuration_set_operation_timeout_seconds(c, atoi(v)); }
static void c_io_threads(void *c, const char *v) { p_pulsar_client_configuration_set_io_threads(c, atoi(v)); }
static void c_listener_threads(void *c, const char *v) { p_pulsar_client_configuration_set_message_listener_threads(c, atoi(v)); }
static void c_lookups(void *c, const char *v) { p_pulsar_client_configuration_set_concurrent_lookup_request(c, atoi(v)); }
static void c_stats(void *c, const char *v) { p_pulsar_client_configuration_set_stats_interval_in_seconds(c, (unsigned int)atoi(v)); }
static void c_trust(void *c, const char *v) { p_pulsar_client_configuration_set_tls_trust_certs_file_path(c, v); }
static void c_insecure(void *c, const char *v) { p_pulsar_client_configuration_set_tls_allow_insecure_connection(c, atoi(v)); }
static void c_hostname(void *c, const char *v) { p_pulsar_client_configuration_set_validate_hostname(c, atoi(v)); }
static void c_key(void *c, const char *v) { p_pulsar_client_configuration_set_tls_private_key_file_path(c, v); }
static void c_cert(void *c, const char *v) { p_pulsar_client_configuration_set_tls_certificate_file_path(c, v); }
static void c_listener(void *c, const char *v) { p_pulsar_client_configuration_set_listener_name(c, v); }
static void r_queue(void *c, const char *v) { p_pulsar_reader_configuration_set_receiver_queue_size(c, atoi(v)); }
static void r_name(void *c, const char *v) { p_pulsar_reader_configuration_set_reader_name(c, v); }
static void r_role_prefix(void *c, const char *v) { p_pulsar_reader_configuration_set_subscription_role_prefix(c, v); }
static void r_compacted(void *c, const char *v) { p_pulsar_reader_configuration_set_read_compacted(c, atoi(v)); }

static const setting_t CLIENT_SETTINGS[] = {
    {"operation_timeout_seconds", c_operation_timeout}, {"io_threads", c_io_threads},
    {"message_listener_threads", c_listener_threads},   {"concurrent_lookup_requests", c_lookups},
    {"stats_interval_in_seconds", c_stats},             {"tls_trust_certs_file_path", c_trust},
    {"tls_allow_insecure_connection", c_insecure},      {"tls_validate_hostname", c_hostname},
    {"tls_private_key_file_path", c_key},               {"tls_certificate_file_path", c_cert},
    {"listener_name", c_listener},
};
static const setting_t READER_SETTINGS[] = {
    {"receiver_queue_size", r_queue}, {"reader_name", r_name},
    {"subscription_role_prefix", r_role_prefix}, {"is_read_compacted", r_compacted},
};
#define N_CLIENT_SETTINGS (sizeof CLIENT_SETTINGS / sizeof CLIENT_SETTINGS[0])
#define N_READER_SETTINGS (sizeof READER_SETTINGS / sizeof READER_SETTINGS[0])

static const setting_t *find_setting(const setting_t *table, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(table[i].name, name) == 0) return &table[i];
    return NULL;
}

/* The i-th setting name of the client (reader == 0) or reader (reader != 0) table; NULL past its end. */
PAR_EXPORT const char *par_setting_name(int reader, int i) {
    size_t n = reader ? N_READER_SETTINGS : N_CLIENT_SETTINGS;
    if (i < 0 || (size_t)i >= n) return NULL;
    return reader ? READER_SETTINGS[i].name : CLIENT_SETTINGS[i].name;
}

/* A client from settings given as name/value pairs (the pulsar.Client keyword names). An unknown
 * name is an error naming it: the Python side only passes names it checked. */
PAR_EXPORT void *par_client_create(const char *service_url, const char *const *names, const char *const *values, int n,
                                   char *err, size_t errlen) {
    if (g_lib == NULL) {
        set_error(err, errlen, "libpulsar not loaded", NULL);
        return NULL;
    }
    pulsar_client_configuration_t *conf = p_pulsar_client_configuration_create();
    pulsar_authentication_t *auth = NULL;
    const char *auth_plugin = NULL, *auth_params = NULL;
    p_pulsar_client_configuration_set_logger(conf, log_warnings, NULL);
    for (int i = 0; i < n; i++) {
        const char *name = names[i], *value = values[i];
        const setting_t *setting = find_setting(CLIENT_SETTINGS, N_CLIENT_SETTINGS, name);
        if (strcmp(name, "auth_plugin") == 0) {
            auth_plugin = value;
        } else if (strcmp(name, "auth_params") == 0) {
            auth_params = value;
        } else if (setting != NULL) {
            setting->apply(conf, value);
        } else {
            set_error(err, errlen, "unsupported client setting: ", name);
            p_pulsar_client_configuration_free(conf);
            return NULL;
        }
    }
    if (auth_plugin != NULL) {
        /* Only the client's built-in plugins: the factory dlopen()s any other name as a library path. */
        if (!is_builtin_auth_plugin(auth_plugin) || auth_params == NULL) {
            set_error(err, errlen, "unsupported authentication plugin: ", auth_plugin);
            p_pulsar_client_configuration_free(conf);
            return NULL;
        }
        auth = p_pulsar_authentication_create(auth_plugin, auth_params);
        p_pulsar_client_configuration_set_auth(conf, auth);
    }
    pulsar_client_t *client = p_pulsar_client_create(service_url, conf);
    /* The client copied the configuration (and holds the authentication by shared pointer). */
    p_pulsar_client_configuration_free(conf);
    if (auth != NULL) p_pulsar_authentication_free(auth);
    if (client == NULL) set_error(err, errlen, "cannot create a client for ", service_url);
    return client;
}

PAR_EXPORT void par_client_free(void *client) {
    if (client == NULL) return;
    p_pulsar_client_close((pulsar_client_t *)client);
    p_pulsar_client_free((pulsar_client_t *)client);
}

/* ---- readers ----------------------------------------------------------------------------------- */
typedef struct {
    pulsar_reader_t *reader;
    pulsar_message_t *pending; /* read ahead: the first message of the next call */
    columns_t cols;
    int have_prev;
    msg_id_t prev;
} par_reader_t;

/* What one par_read_group call appended: one entry's messages, or the part of them that fit. */
typedef struct {
    int32_t status;         /* 0 messages appended; 1 nothing arrived within the timeout; -1 error */
    int32_t result;         /* the pulsar_result of an error */
    int64_t rows_before;    /* the batch's rows before this call */
    int64_t rows;           /* and after */
    int64_t ledger, entry;  /* the entry of the appended messages */
    int32_t batch_index;    /* of the first appended message (-1: not batched) */
    int32_t new_entry;      /* 1: the first appended message starts an entry; 0: continues the last call's */
    int32_t entry_complete; /* 1: the entry's last message was appended; 0: more follow; -1: unknown */
    int32_t padding;
    int64_t first_chunk_ledger, first_chunk_entry; /* a chunked message's first chunk; -1 otherwise */
} par_group_t;

/* Python's ctypes mirror of par_group_t checks its size against this at load. */
PAR_EXPORT size_t par_group_size(void) { return sizeof(par_group_t); }

PAR_EXPORT void *par_reader_open(void *client, const char *topic, const void *start_id, int start_len,
                                 const char *const *names, const char *const *values, int n, int *result, char *err,
                                 size_t errlen) {
    *result = PULSAR_RESULT_OK;
    if (client == NULL || g_lib == NULL) {
        set_error(err, errlen, "no client", NULL);
        *result = 1;
        return NULL;
    }
    pulsar_reader_configuration_t *conf = p_pulsar_reader_configuration_create();
    const char *public_key = NULL, *private_key = NULL;
    for (int i = 0; i < n; i++) {
        const char *name = names[i], *value = values[i];
        int number = atoi(value);
        const setting_t *setting = find_setting(READER_SETTINGS, N_READER_SETTINGS, name);
        if (setting != NULL) {
            setting->apply(conf, value);
        } else if (strcmp(name, "public_key_path") == 0) {
            public_key = value;
        } else if (strcmp(name, "private_key_path") == 0) {
            private_key = value;
        } else if (strcmp(name, "crypto_failure_action") == 0) {
            p_pulsar_reader_configuration_set_crypto_failure_action(conf, number);
        } else if (strcmp(name, "start_message_id_inclusive") == 0 && p_set_start_inclusive != NULL) {
            p_set_start_inclusive(conf, number != 0);
        } else {
            set_error(err, errlen, "unsupported reader setting: ", name);
            p_pulsar_reader_configuration_free(conf);
            *result = 2;
            return NULL;
        }
    }
    if (private_key != NULL)
        p_pulsar_reader_configuration_set_default_crypto_key_reader(conf, public_key != NULL ? public_key : "", private_key);
    pulsar_message_id_t *start = NULL;
    if (start_id != NULL && start_len > 0) {
        start = p_pulsar_message_id_deserialize(start_id, (uint32_t)start_len);
        if (start == NULL) {
            set_error(err, errlen, "cannot deserialize the start message id", NULL);
            p_pulsar_reader_configuration_free(conf);
            *result = 2;
            return NULL;
        }
    }
    par_reader_t *r = calloc(1, sizeof *r);
    if (r == NULL || columns_init(&r->cols) != 0) {
        if (r != NULL) columns_free(&r->cols);
        free(r);
        if (start != NULL) p_pulsar_message_id_free(start);
        p_pulsar_reader_configuration_free(conf);
        set_error(err, errlen, "out of memory", NULL);
        *result = 1;
        return NULL;
    }
    pulsar_result res = p_pulsar_client_create_reader((pulsar_client_t *)client, topic,
                                                      start != NULL ? start : p_pulsar_message_id_earliest(), conf,
                                                      &r->reader);
    if (start != NULL) p_pulsar_message_id_free(start);
    p_pulsar_reader_configuration_free(conf);
    if (res != PULSAR_RESULT_OK) {
        set_error(err, errlen, "cannot open a reader: ", p_pulsar_result_str(res));
        columns_free(&r->cols);
        free(r);
        *result = res;
        return NULL;
    }
    return r;
}

PAR_EXPORT void par_reader_close(void *handle) {
    par_reader_t *r = handle;
    if (r == NULL) return;
    if (r->pending != NULL) p_pulsar_message_free(r->pending);
    if (r->reader != NULL) {
        p_pulsar_reader_close(r->reader);
        p_pulsar_reader_free(r->reader);
    }
    columns_free(&r->cols);
    free(r);
}

/* -1: error (the result code), 0 no, 1 yes. */
PAR_EXPORT int par_has_message_available(void *handle, int *result) {
    par_reader_t *r = handle;
    int available = 0;
    *result = p_pulsar_reader_has_message_available(r->reader, &available);
    return *result == PULSAR_RESULT_OK ? (available != 0) : -1;
}

static int message_id_of(pulsar_message_t *msg, uint8_t **bytes, int *len, msg_id_t *id) {
    pulsar_message_id_t *mid = p_pulsar_message_get_message_id(msg);
    *bytes = mid != NULL ? p_pulsar_message_id_serialize(mid, len) : NULL;
    if (mid != NULL) p_pulsar_message_id_free(mid);
    if (*bytes == NULL || *len < 0) return -1;
    return parse_id(*bytes, *len, id, 0);
}

static int append_message(columns_t *c, pulsar_message_t *msg, const uint8_t *id_bytes, int id_len) {
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

/* Whether appending `msg` could take a variable-width column past Arrow's int32 offsets. */
static int would_overflow(const columns_t *c, pulsar_message_t *msg) {
    int64_t values = c->var[COL_VALUE].data.len;
    return c->rows > 0 && values + (int64_t)p_pulsar_message_get_length(msg) + 65536 > INT32_MAX;
}

/* Append the messages of one entry, up to `max_rows` rows in the batch: returns after the entry's
 * last message, when the batch is full, when the next message belongs to another entry (kept for
 * the next call), or when none arrives within `timeout_ms`. */
PAR_EXPORT int par_read_group(void *handle, int timeout_ms, int64_t max_rows, par_group_t *g) {
    par_reader_t *r = handle;
    memset(g, 0, sizeof *g);
    g->rows_before = g->rows = r->cols.rows;
    pulsar_message_t *msg = r->pending;
    r->pending = NULL;
    if (msg == NULL) {
        pulsar_result res = p_pulsar_reader_read_next_with_timeout(r->reader, &msg, timeout_ms);
        if (res == PULSAR_RESULT_TIMEOUT) return g->status = 1;
        if (res != PULSAR_RESULT_OK) {
            g->result = res;
            return g->status = -1;
        }
    }
    int appended = 0;
    for (;;) {
        uint8_t *id_bytes = NULL;
        int id_len = 0;
        msg_id_t id;
        if (message_id_of(msg, &id_bytes, &id_len, &id) != 0) {
            free(id_bytes);
            p_pulsar_message_free(msg);
            g->result = 1;
            return g->status = -1; /* an id this library cannot read: the caller falls back */
        }
        int continues = r->have_prev && id.ledger == r->prev.ledger && id.entry == r->prev.entry && id.batch_index >= 1 &&
                        id.batch_index == r->prev.batch_index + 1;
        if (appended > 0 && (!continues || would_overflow(&r->cols, msg))) {
            free(id_bytes);
            r->pending = msg; /* another entry (or a batch that cannot grow): the next call's */
            g->entry_complete = continues ? 0 : 1;
            break;
        }
        if (appended == 0) {
            g->ledger = id.ledger;
            g->entry = id.entry;
            g->batch_index = id.batch_index;
            g->new_entry = !continues;
            g->first_chunk_ledger = id.first_chunk_ledger;
            g->first_chunk_entry = id.first_chunk_entry;
        }
        int failed = append_message(&r->cols, msg, id_bytes, id_len);
        free(id_bytes);
        p_pulsar_message_free(msg);
        msg = NULL;
        if (failed) {
            g->result = 1;
            return g->status = -1;
        }
        appended++;
        r->prev = id;
        r->have_prev = 1;
        if (id.batch_index < 0 || (id.batch_size > 0 && id.batch_index >= id.batch_size - 1)) {
            g->entry_complete = 1;
            break;
        }
        if (r->cols.rows >= max_rows) {
            g->entry_complete = id.batch_size > 0 ? 0 : -1;
            break;
        }
        /* A batch's messages are queued together when its entry arrives: the rest are there. */
        pulsar_result res = p_pulsar_reader_read_next_with_timeout(r->reader, &msg, timeout_ms);
        if (res != PULSAR_RESULT_OK) {
            g->entry_complete = -1; /* the caller asks the broker, as the Python path does */
            if (res != PULSAR_RESULT_TIMEOUT) g->result = res;
            break;
        }
    }
    g->rows = r->cols.rows;
    return g->status = 0;
}

PAR_EXPORT int64_t par_rows(void *handle) { return ((par_reader_t *)handle)->cols.rows; }

PAR_EXPORT void par_truncate(void *handle, int64_t rows) { columns_truncate(&((par_reader_t *)handle)->cols, rows); }

/* ---- handing a batch to Python: the Arrow C Data Interface ------------------------------------ */
/* The standard ABI (https://arrow.apache.org/docs/format/CDataInterface.html), which pyarrow imports
 * without a copy: a batch is a struct array whose children are the columns below, by name; Python
 * imports the schema once (par_arrow_schema) and checks it against schemas/columns.py, so a column
 * that drifted is a refused library, not a misread buffer. */
#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE
#define ARROW_FLAG_NULLABLE 2
struct ArrowSchema {
    const char *format;
    const char *name;
    const char *metadata;
    int64_t flags;
    int64_t n_children;
    struct ArrowSchema **children;
    struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};
struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};
#endif

/* The exported tree: the batch (a struct), its columns, and the properties map's entries and their
 * key and value. `source` says which buffers a node carries; `parent` its place in the tree. */
enum { N_BATCH, N_KEY, N_VALUE, N_ID, N_PUBLISH, N_EVENT, N_PROPS, N_ORDERING, N_PRODUCER, N_SCHEMA_VERSION,
       N_ENTRIES, N_PROP_KEY, N_PROP_VALUE, N_NODES };
enum { SRC_NONE, SRC_VAR, SRC_INT64, SRC_EVENT, SRC_PROP_OFFSETS };
typedef struct {
    const char *name, *format;
    int64_t flags;
    int parent; /* -1: the root */
    int source; /* SRC_* */
    int varcol; /* with SRC_VAR: the COL_* it reads */
} node_t;

static const node_t NODES[N_NODES] = {
    [N_BATCH] = {"", "+s", 0, -1, SRC_NONE, 0},
    [N_KEY] = {"key", "u", ARROW_FLAG_NULLABLE, N_BATCH, SRC_VAR, COL_KEY},
    [N_VALUE] = {"value", "z", ARROW_FLAG_NULLABLE, N_BATCH, SRC_VAR, COL_VALUE},
    [N_ID] = {"messageId", "z", ARROW_FLAG_NULLABLE, N_BATCH, SRC_VAR, COL_ID},
    [N_PUBLISH] = {"publishTime", "tsu:UTC", ARROW_FLAG_NULLABLE, N_BATCH, SRC_INT64, 0},
    [N_EVENT] = {"eventTime", "tsu:UTC", ARROW_FLAG_NULLABLE, N_BATCH, SRC_EVENT, 0},
    [N_PROPS] = {"properties", "+m", ARROW_FLAG_NULLABLE, N_BATCH, SRC_PROP_OFFSETS, 0},
    [N_ORDERING] = {"orderingKey", "u", ARROW_FLAG_NULLABLE, N_BATCH, SRC_VAR, COL_ORDERING},
    [N_PRODUCER] = {"producerName", "u", ARROW_FLAG_NULLABLE, N_BATCH, SRC_VAR, COL_PRODUCER},
    [N_SCHEMA_VERSION] = {"schemaVersion", "l", ARROW_FLAG_NULLABLE, N_BATCH, SRC_INT64, 0},
    [N_ENTRIES] = {"entries", "+s", 0, N_PROPS, SRC_NONE, 0},
    [N_PROP_KEY] = {"key", "u", 0, N_ENTRIES, SRC_VAR, COL_PROP_KEY},
    [N_PROP_VALUE] = {"value", "u", ARROW_FLAG_NULLABLE, N_ENTRIES, SRC_VAR, COL_PROP_VALUE},
};

static int64_t children_of(int node, int *out) {
    int64_t n = 0;
    for (int i = 0; i < N_NODES; i++)
        if (NODES[i].parent == node) out[n++] = i;
    return n;
}

/* One allocation per exported schema: the nodes and their child pointers. */
typedef struct {
    struct ArrowSchema nodes[N_NODES];
    struct ArrowSchema *links[N_NODES];
} schema_block_t;

static void release_schema_child(struct ArrowSchema *s) { s->release = NULL; }

static void release_schema(struct ArrowSchema *s) {
    schema_block_t *block = s->private_data;
    for (int i = 1; i < N_NODES; i++)
        if (block->nodes[i].release != NULL) block->nodes[i].release(&block->nodes[i]);
    s->release = NULL;
    free(block);
}

/* The batch's schema as an ArrowSchema the caller imports (moving it out) and then frees with
 * par_arrow_schema_free; NULL when out of memory. */
PAR_EXPORT struct ArrowSchema *par_arrow_schema(void) {
    schema_block_t *block = calloc(1, sizeof *block);
    struct ArrowSchema *out = calloc(1, sizeof *out);
    if (block == NULL || out == NULL) {
        free(block);
        free(out);
        return NULL;
    }
    int used = 0;
    for (int i = 0; i < N_NODES; i++) {
        struct ArrowSchema *node = i == N_BATCH ? out : &block->nodes[i];
        int kids[N_NODES];
        node->format = NODES[i].format;
        node->name = NODES[i].name;
        node->flags = NODES[i].flags;
        node->n_children = children_of(i, kids);
        node->children = node->n_children > 0 ? &block->links[used] : NULL;
        for (int64_t k = 0; k < node->n_children; k++) block->links[used++] = &block->nodes[kids[k]];
        node->release = i == N_BATCH ? release_schema : release_schema_child;
        node->private_data = i == N_BATCH ? block : NULL;
    }
    return out;
}

PAR_EXPORT void par_arrow_schema_free(struct ArrowSchema *s) {
    if (s == NULL) return;
    if (s->release != NULL) s->release(s); /* not imported: still ours */
    free(s);
}

/* One allocation per exported batch: the columns it owns, the nodes, their buffer and child pointers. */
typedef struct {
    columns_t owned;
    struct ArrowArray nodes[N_NODES];
    struct ArrowArray *links[N_NODES];
    const void *buffers[N_NODES][3];
} array_block_t;

static const uint64_t EMPTY[1] = {0}; /* a non-null address for a buffer of no bytes */

static const void *bytes_of(const buf_t *b) { return b->data != NULL ? (const void *)b->data : (const void *)EMPTY; }

static void release_array_child(struct ArrowArray *a) { a->release = NULL; }

static void release_array(struct ArrowArray *a) {
    array_block_t *block = a->private_data;
    for (int i = 1; i < N_NODES; i++)
        if (block->nodes[i].release != NULL) block->nodes[i].release(&block->nodes[i]);
    columns_free(&block->owned);
    a->release = NULL;
    free(block);
}

static void pad_bits(buf_t *b, int64_t bits) {
    int64_t bytes = (bits + 7) / 8;
    if (b->len < bytes && buf_reserve(b, bytes - b->len) == 0) {
        memset(b->data + b->len, 0, (size_t)(bytes - b->len));
        b->len = bytes;
    }
}

/* Move the batch's columns out (the reader starts an empty batch) as an ArrowArray the caller
 * imports (moving it out) and then frees with par_arrow_array_free; NULL when out of memory. */
PAR_EXPORT struct ArrowArray *par_export_arrow(void *handle) {
    par_reader_t *r = handle;
    array_block_t *block = calloc(1, sizeof *block);
    struct ArrowArray *out = calloc(1, sizeof *out);
    if (block == NULL || out == NULL) {
        free(block);
        free(out);
        return NULL;
    }
    block->owned = r->cols;
    memset(&r->cols, 0, sizeof r->cols);
    if (columns_init(&r->cols) != 0) {
        columns_free(&r->cols);
        r->cols = block->owned;
        free(block);
        free(out);
        return NULL;
    }
    columns_t *c = &block->owned;
    for (int i = 0; i < N_VARCOLS; i++) pad_bits(&c->var[i].valid, (i == COL_PROP_KEY || i == COL_PROP_VALUE) ? c->props : c->rows);
    pad_bits(&c->event_valid, c->rows);
    int used = 0;
    for (int i = 0; i < N_NODES; i++) {
        struct ArrowArray *node = i == N_BATCH ? out : &block->nodes[i];
        const void **bufs = block->buffers[i];
        const node_t *d = &NODES[i];
        int kids[N_NODES];
        int inside_props = d->parent == N_ENTRIES || i == N_ENTRIES;
        node->length = inside_props ? c->props : c->rows;
        node->null_count = 0;
        switch (d->source) {
        case SRC_VAR: {
            const varcol_t *v = &c->var[d->varcol];
            node->n_buffers = 3;
            bufs[0] = v->valid.len > 0 ? v->valid.data : NULL;
            bufs[1] = bytes_of(&v->offsets);
            bufs[2] = bytes_of(&v->data);
            node->null_count = bufs[0] != NULL ? -1 : 0; /* pyarrow counts them when asked */
            break;
        }
        case SRC_INT64:
            node->n_buffers = 2;
            bufs[0] = NULL;
            bufs[1] = bytes_of(i == N_PUBLISH ? &c->publish_us : &c->schema_version);
            break;
        case SRC_EVENT:
            node->n_buffers = 2;
            bufs[0] = c->event_valid.len > 0 ? c->event_valid.data : NULL;
            bufs[1] = bytes_of(&c->event_us);
            node->null_count = bufs[0] != NULL ? -1 : 0;
            break;
        case SRC_PROP_OFFSETS:
            node->n_buffers = 2;
            bufs[0] = NULL;
            bufs[1] = bytes_of(&c->prop_offsets);
            break;
        default: /* a struct: its validity only, none null */
            node->n_buffers = 1;
            bufs[0] = NULL;
        }
        node->buffers = bufs;
        node->n_children = children_of(i, kids);
        node->children = node->n_children > 0 ? &block->links[used] : NULL;
        for (int64_t k = 0; k < node->n_children; k++) block->links[used++] = &block->nodes[kids[k]];
        node->release = i == N_BATCH ? release_array : release_array_child;
        node->private_data = i == N_BATCH ? block : NULL;
    }
    return out;
}

PAR_EXPORT void par_arrow_array_free(struct ArrowArray *a) {
    if (a == NULL) return;
    if (a->release != NULL) a->release(a); /* not imported: still ours */
    free(a);
}
