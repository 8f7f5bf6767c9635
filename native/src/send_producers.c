/*
 * send_producers.c: the producer symbols of libpulsar resolved (pns_init), the producer settings Python reads, and
 * producers (send_internal.h: the native sender's overview).
 */
#include "send_internal.h"

#define S_DEFINE(ret, name, args) ret(*s_##name) args;
SENDER_SYMBOLS(S_DEFINE)
#undef S_DEFINE
void (*s_set_null_value)(pulsar_message_t *);
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

/* ---- producers: create_producer's keyword names applied here (Python reads them: pns_setting_name) ---- */
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
