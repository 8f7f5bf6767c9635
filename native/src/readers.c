/*
 * readers.c: readers, and one entry's messages appended to the batch per call (par_read_group).
 */
#include <stddef.h>

#include "par_internal.h"

/* ---- readers ----------------------------------------------------------------------------------- */

/* What one par_read_group call appended: one entry's messages, or the part of them that fit. */
typedef struct {
    int32_t status;         /* 0 messages appended; 1 nothing arrived within the timeout; -1 error; 2 nothing
                             * appended: the batch cannot take the next message (export it, then call again) */
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

/* par_group_t's layout, which Python's ctypes mirror (native_library.GROUP_FIELDS) is checked against at load,
 * field by field: the i-th field's name, offset and size; NULL past the last. */
#define GROUP_FIELD(name) {#name, offsetof(par_group_t, name), sizeof(((par_group_t *)0)->name)}
static const struct {
    const char *name;
    size_t offset, size;
} GROUP_FIELDS[] = {GROUP_FIELD(status),     GROUP_FIELD(result),         GROUP_FIELD(rows_before),
                    GROUP_FIELD(rows),       GROUP_FIELD(ledger),         GROUP_FIELD(entry),
                    GROUP_FIELD(batch_index), GROUP_FIELD(new_entry),     GROUP_FIELD(entry_complete),
                    GROUP_FIELD(padding),    GROUP_FIELD(first_chunk_ledger), GROUP_FIELD(first_chunk_entry)};

PAR_EXPORT const char *par_group_field(int i, size_t *offset, size_t *size) {
    if (i < 0 || (size_t)i >= sizeof GROUP_FIELDS / sizeof GROUP_FIELDS[0]) return NULL;
    *offset = GROUP_FIELDS[i].offset;
    *size = GROUP_FIELDS[i].size;
    return GROUP_FIELDS[i].name;
}

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
        if (apply_reader_setting(conf, name, value)) {
            /* a user's pass-through setting (clients.c's table) */
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

/* Append the messages of one entry, up to `max_rows` rows in the batch: returns after the entry's
 * last message, when the batch is full, when the next message belongs to another entry (kept for
 * the next call), or when none arrives within `timeout_ms`. The grouping rules are the Python
 * path's too (range_reader.EntryGroup; tests/unit/test_read_path_conformance.py holds both to them):
 * a message continues the group when it is of the same ledger and entry at the next batch index;
 * a message whose id does not give its batch size ends its group (the loop asks the broker where
 * that matters, rather than waiting here for a message that may never come). */
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
    if (would_overflow(&r->cols, msg)) {
        r->pending = msg; /* the first message of a new batch */
        return g->status = 2;
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
        if (id.batch_index < 0 || id.batch_size <= 0 || id.batch_index >= id.batch_size - 1) {
            g->entry_complete = id.batch_index < 0 || id.batch_size > 0 ? 1 : -1;
            break;
        }
        if (r->cols.rows >= max_rows) {
            g->entry_complete = 0;
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
