/*
 * The C API's own rate (bench/profile_read.py): a reader over libpulsar's C API, from the earliest
 * message, reading N messages per round and touching what the columns carry (payload, key, id
 * bytes, publish and event time, properties, ordering key, producer), with no Arrow and no Python.
 * The floor under any read path built on this client: the native read path adds its column writes
 * and one Python call per entry to it.
 *
 *   reader_loop <libpulsar.so> <service url> <topic> <messages> <rounds>   -> "rate <msg/s>" per round
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef void *(*ptr_fn)();
#define LOAD(name) void *name = dlsym(lib, #name); if (!name) { fprintf(stderr, "missing %s\n", #name); return 2; }

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void quiet(int level, const char *file, int line, const char *message, void *ctx) {
    (void)level; (void)file; (void)line; (void)message; (void)ctx;
}

int main(int argc, char **argv) {
    if (argc != 6) { fprintf(stderr, "usage: %s libpulsar url topic messages rounds\n", argv[0]); return 2; }
    void *lib = dlopen(argv[1], RTLD_NOW);
    if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 2; }
    LOAD(pulsar_client_configuration_create) LOAD(pulsar_client_configuration_set_logger) LOAD(pulsar_client_create)
    LOAD(pulsar_reader_configuration_create) LOAD(pulsar_reader_configuration_set_receiver_queue_size)
    LOAD(pulsar_client_create_reader) LOAD(pulsar_message_id_earliest) LOAD(pulsar_reader_read_next_with_timeout)
    LOAD(pulsar_message_get_data) LOAD(pulsar_message_get_length) LOAD(pulsar_message_get_partitionKey)
    LOAD(pulsar_message_get_message_id) LOAD(pulsar_message_id_serialize) LOAD(pulsar_message_id_free)
    LOAD(pulsar_message_get_publish_timestamp) LOAD(pulsar_message_get_event_timestamp) LOAD(pulsar_message_get_properties)
    LOAD(pulsar_string_map_size) LOAD(pulsar_string_map_free) LOAD(pulsar_message_get_orderingKey)
    LOAD(pulsar_message_get_producer_name) LOAD(pulsar_message_free) LOAD(pulsar_reader_close) LOAD(pulsar_reader_free)
    long messages = atol(argv[4]), rounds = atol(argv[5]);
    void *conf = ((ptr_fn)pulsar_client_configuration_create)();
    ((void (*)(void *, void *, void *))pulsar_client_configuration_set_logger)(conf, (void *)quiet, NULL);
    void *client = ((void *(*)(const char *, void *))pulsar_client_create)(argv[2], conf);
    uint64_t sink = 0;
    for (long r = 0; r < rounds; r++) {
        void *rconf = ((ptr_fn)pulsar_reader_configuration_create)();
        ((void (*)(void *, int))pulsar_reader_configuration_set_receiver_queue_size)(rconf, 10000);
        void *reader = NULL;
        int res = ((int (*)(void *, const char *, const void *, void *, void **))pulsar_client_create_reader)(
            client, argv[3], ((ptr_fn)pulsar_message_id_earliest)(), rconf, &reader);
        if (res != 0) { fprintf(stderr, "create_reader: %d\n", res); return 1; }
        double t = now();
        long got = 0;
        for (; got < messages; got++) {
            void *msg = NULL;
            if (((int (*)(void *, void **, int))pulsar_reader_read_next_with_timeout)(reader, &msg, 30000) != 0) break;
            const char *data = ((const char *(*)(void *))pulsar_message_get_data)(msg);
            uint32_t len = ((uint32_t (*)(void *))pulsar_message_get_length)(msg);
            sink += len ? (uint8_t)data[len - 1] : 0;
            sink += strlen(((const char *(*)(void *))pulsar_message_get_partitionKey)(msg));
            void *mid = ((ptr_fn)pulsar_message_get_message_id)(msg);
            int id_len = 0;
            void *id = ((void *(*)(void *, int *))pulsar_message_id_serialize)(mid, &id_len);
            sink += (uint64_t)id_len;
            free(id);
            ((void (*)(void *))pulsar_message_id_free)(mid);
            sink += ((uint64_t (*)(void *))pulsar_message_get_publish_timestamp)(msg);
            sink += ((uint64_t (*)(void *))pulsar_message_get_event_timestamp)(msg);
            void *props = ((ptr_fn)pulsar_message_get_properties)(msg);
            sink += (uint64_t)((int (*)(void *))pulsar_string_map_size)(props);
            ((void (*)(void *))pulsar_string_map_free)(props);
            sink += strlen(((const char *(*)(void *))pulsar_message_get_orderingKey)(msg));
            sink += strlen(((const char *(*)(void *))pulsar_message_get_producer_name)(msg));
            ((void (*)(void *))pulsar_message_free)(msg);
        }
        double elapsed = now() - t;
        ((int (*)(void *))pulsar_reader_close)(reader);
        ((void (*)(void *))pulsar_reader_free)(reader);
        if (got != messages) { fprintf(stderr, "read %ld of %ld\n", got, messages); return 1; }
        printf("rate %.0f\n", (double)messages / elapsed);
        fflush(stdout);
    }
    return sink == 42 ? 3 : 0; /* keeps the reads from being optimised away */
}
