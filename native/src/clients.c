/*
 * clients.c: clients, and the settings tables (the pulsar.Client / create_reader keyword names this library applies, which Python reads with par_setting_name).
 */
#include "par_internal.h"

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

/* Applies a reader setting of the table to `conf`: 1 when `name` is one, else 0. */
int apply_reader_setting(pulsar_reader_configuration_t *conf, const char *name, const char *value) {
    const setting_t *setting = find_setting(READER_SETTINGS, N_READER_SETTINGS, name);
    if (setting == NULL) return 0;
    setting->apply(conf, value);
    return 1;
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
    /* No producer or consumer statistics unless asked (stats_interval_in_seconds): libpulsar only ever logs them at
     * INFO, which log_warnings drops, and keeping them costs every message a lock and two percentile updates on the
     * client's I/O thread (the sink's native sender: bench/README.md "jvm_sink.py"). */
    p_pulsar_client_configuration_set_stats_interval_in_seconds(conf, 0);
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
