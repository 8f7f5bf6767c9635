/*
 * par_internal.h: what the files of the native read path's library share (not installed, not part of
 * its interface, which is the PAR_EXPORT functions and the Arrow C Data Interface structures).
 *
 * The library's jobs, one file each:
 *   libpulsar.c     binding libpulsar's C API symbol by symbol (par_load), and one C++ member
 *   clients.c       the settings tables Python reads (par_setting_name) and clients
 *   readers.c       readers, and reading one entry's messages per call (par_read_group)
 *   columns.c       the column buffers a batch is filled into, a message at a time
 *   message_ids.c   the MessageIdData protobuf read from a message's id
 *   arrow_export.c  a filled batch handed to Python as Arrow C Data Interface structures
 *   send_*.c, sending.c  the sink's native sender: an Arrow batch's rows routed and sent (its own symbols,
 *                   pns_init; send_internal.h lists its files)
 */
#ifndef PAR_INTERNAL_H
#define PAR_INTERNAL_H

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

#define DECLARE(ret, name, args) extern ret(*p_##name) args;
SYMBOLS(DECLARE)
#undef DECLARE

extern void *g_lib; /* libpulsar, once par_load resolved it */
/* pulsar::ReaderConfiguration::setStartMessageIdInclusive, or NULL (libpulsar.c says why) */
extern void *(*p_set_start_inclusive)(pulsar_reader_configuration_t *, _Bool);

/* Writes "text detail" into a caller's error buffer. */
void set_error(char *err, size_t errlen, const char *text, const char *detail);

/* ---- columns.c ---------------------------------------------------------------------------------- */
/* A growable buffer, 64-byte aligned; every write is bounds checked (buf_reserve). */
typedef struct {
    uint8_t *data;
    int64_t len;
    int64_t cap;
} buf_t;

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

int buf_reserve(buf_t *b, int64_t extra);
int columns_init(columns_t *c);
void columns_free(columns_t *c);
void columns_truncate(columns_t *c, int64_t rows);
int append_message(columns_t *c, pulsar_message_t *msg, const uint8_t *id_bytes, int id_len);
int would_overflow(const columns_t *c, pulsar_message_t *msg);

/* ---- message_ids.c ------------------------------------------------------------------------------ */
typedef struct {
    int64_t ledger, entry;
    int32_t batch_index; /* -1: not batched */
    int32_t batch_size;  /* 0: unknown */
    int64_t first_chunk_ledger, first_chunk_entry; /* -1: not a chunked message */
} msg_id_t;

int parse_id(const uint8_t *p, int64_t n, msg_id_t *id, int nested);
int message_id_of(pulsar_message_t *msg, uint8_t **bytes, int *len, msg_id_t *id);

/* ---- clients.c ---------------------------------------------------------------------------------- */
int apply_reader_setting(pulsar_reader_configuration_t *conf, const char *name, const char *value);

/* ---- readers.c ---------------------------------------------------------------------------------- */
typedef struct {
    pulsar_reader_t *reader;
    pulsar_message_t *pending; /* read ahead: the first message of the next call */
    columns_t cols;
    int have_prev;
    msg_id_t prev;
} par_reader_t;

#endif
