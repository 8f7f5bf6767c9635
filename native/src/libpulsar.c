/*
 * libpulsar.c: binding libpulsar's C API (par_load), and the library's overview.
 *
 * The native read path's library (_pulsar_arrow_reader) fills the columns of an Arrow record batch
 * from a Pulsar reader, one entry (a producer's batch) per call, with no Python object per message,
 * and hands each batch to Python through the Arrow C Data Interface (par_internal.h lists its files).
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
#include "par_internal.h"

#define DEFINE(ret, name, args) ret(*p_##name) args;
SYMBOLS(DEFINE)
#undef DEFINE

void *g_lib;

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
void *(*p_set_start_inclusive)(pulsar_reader_configuration_t *, _Bool);

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

void set_error(char *err, size_t errlen, const char *text, const char *detail) {
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
