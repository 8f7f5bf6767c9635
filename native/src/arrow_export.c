/*
 * arrow_export.c: a filled batch handed to Python as Arrow C Data Interface structures, which pyarrow imports without a copy.
 */
#include "par_internal.h"

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
