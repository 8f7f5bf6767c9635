/*
 * send_tasks.c: a task's lifetime (reference counted), its pacing to the broker's confirmations and the answers
 * counted by the C callback (send_internal.h: the native sender's overview).
 */
#include <time.h>

#include "send_internal.h"

/* A task sending to a topic of `partitions` partitions (0: not partitioned; `topic_partition`: the index of a
 * partition named itself, else -1), round robin from `first_partition` (or only there, `single`). */
PAR_EXPORT void *pns_task_create(int32_t partitions, int32_t topic_partition, int64_t first_partition, int32_t single) {
    if (partitions < 0 || partitions > 1000000) return NULL;
    int32_t n = partitions > 0 ? partitions : 1;
    pns_task_t *t = calloc(1, sizeof *t + (size_t)n * sizeof(lane_t));
    if (t == NULL) return NULL;
    if (pthread_mutex_init(&t->lock, NULL) != 0) {
        free(t);
        return NULL;
    }
    pthread_cond_init(&t->answered_cond, NULL);
    t->refs = 1;
    t->lanes_n = n;
    t->partitions = partitions;
    t->topic_partition = topic_partition;
    t->single = single;
    t->next = first_partition;
    for (int32_t i = 0; i < n; i++) {
        t->lanes[i].task = t;
        t->lanes[i].index = i;
        t->lanes[i].last_persisted = -1;
    }
    return t;
}

static void task_release(pns_task_t *t) {
    pthread_mutex_lock(&t->lock);
    int64_t left = --t->refs;
    pthread_mutex_unlock(&t->lock);
    if (left > 0) return;
    pthread_cond_destroy(&t->answered_cond);
    pthread_mutex_destroy(&t->lock);
    free(t->scratch[0]);
    free(t->scratch[1]);
    while (t->kept != NULL) {
        kept_t *next = t->kept->next;
        free(t->kept);
        t->kept = next;
    }
    free(t);
}

/* Python is done with the task; sends still unanswered keep it alive until their callbacks. */
PAR_EXPORT void pns_task_free(void *task) {
    if (task != NULL) task_release((pns_task_t *)task);
}

/* The producer of destination `lane` (its last persisted sequence id: effectivelyOnce's skip, else -1). */
PAR_EXPORT int pns_task_set_producer(void *task, int32_t lane, void *producer, int64_t last_persisted) {
    pns_task_t *t = task;
    if (t == NULL || lane < 0 || lane >= t->lanes_n) return -1;
    t->lanes[lane].producer = producer;
    t->lanes[lane].last_persisted = last_persisted;
    return 0;
}

/* effectivelyOnce's batch cuts (writing/batch_cuts.py): a batch ends after `max_messages` rows (the producer's own cut:
 * its batchingMaxMessages) or after the row whose payloads reach `max_bytes` (a flush); 0: none (pns_send skips the rows
 * at or below a lane's last persisted id). */
PAR_EXPORT int pns_task_cuts(void *task, int64_t max_messages, int64_t max_bytes) {
    pns_task_t *t = task;
    if (t == NULL || max_messages < 0 || max_bytes < 0 || (max_messages > 0 && max_bytes == 0)) return -1;
    t->cut_messages = max_messages;
    t->cut_bytes = max_bytes;
    return 0;
}

int lane_place(pns_task_t *t, lane_t *lane, int64_t sequence_id, int64_t size, int *cut, int *closes) {
    int64_t last = lane->last_persisted;
    *cut = *closes = 0;
    if (t->cut_messages <= 0) return sequence_id <= last;
    if (lane->cut_count > 0 && sequence_id > last && lane->cut_first < last)
        lane->cut_count = lane->cut_bytes = 0; /* the batch holding L was cut elsewhere: the first row above L starts one */
    if (lane->cut_count == 0) lane->cut_first = sequence_id;
    int skip = sequence_id <= last || lane->cut_first == last;
    lane->cut_count++;
    lane->cut_bytes += size;
    if (lane->cut_count < t->cut_messages && lane->cut_bytes < t->cut_bytes) return skip;
    *closes = 1;
    *cut = !skip && lane->cut_count < t->cut_messages; /* at cut_messages the producer cuts it itself */
    lane->cut_count = lane->cut_bytes = 0;
    return skip;
}

void lane_sent(pns_task_t *t, lane_t *lane, int closes) {
    if (closes) {
        t->held -= lane->held;
        lane->held = 0;
    } else {
        lane->held++;
        t->held++;
    }
}

/* Rows handed to the task's producers in effectivelyOnce batches not cut yet (lane_sent's count; -1: no task). Read
 * on the task's thread: the conformance test of the two senders' cuts (tests/unit/test_send_cuts_conformance.py). */
PAR_EXPORT int64_t pns_task_held(void *task) { return task == NULL ? -1 : ((pns_task_t *)task)->held; }

/* A cut's flush answered: each message's own callback reports its send. */
void flushed(pulsar_result result, void *ctx) {
    (void)result;
    (void)ctx;
}

PAR_EXPORT int64_t pns_task_next_partition(void *task) { return ((pns_task_t *)task)->next; }

/* Pace the task's sends to the broker's confirmations (writing/confirmations.py's rule, for the same reason: libpulsar
 * counts a send's timeout from when it enters the producer's queue, so a queue the broker drains slowly, under its
 * publish-rate policy, would time sends out): at most as many in flight as were confirmed in the last `window_ms`,
 * and at least `min_in_flight`. window_ms 0: no pacing (sends never time out). */
PAR_EXPORT int pns_task_pace(void *task, int64_t window_ms, int64_t min_in_flight) {
    pns_task_t *t = task;
    if (t == NULL || window_ms < 0 || min_in_flight < 1) return -1;
    t->pace_window_ns = window_ms * 1000000;
    t->pace_min = min_in_flight;
    t->pace_allowed = min_in_flight;
    t->pace_until_ns = 0;
    return 0;
}

int64_t monotonic_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

/* A confirmation at `now` counted in its bucket (under the lock). */
static void count_confirmation(pns_task_t *t, int64_t now) {
    int64_t index = now / (t->pace_window_ns / PACE_BUCKETS + 1);
    int slot = (int)(index % PACE_BUCKETS);
    if (t->bucket_index[slot] != index) {
        t->bucket_index[slot] = index;
        t->bucket_count[slot] = 0;
    }
    t->bucket_count[slot]++;
}

/* Confirmations since `since` (under the lock), at least pace_min: the buckets wholly after it (a bucket's worth fewer
 * at most, so the bound errs on the slow side). */
static int64_t confirmed_since(const pns_task_t *t, int64_t since, int64_t now) {
    int64_t width = t->pace_window_ns / PACE_BUCKETS + 1;
    int64_t first = since <= 0 ? 0 : (since + width - 1) / width, last = now / width, n = 0;
    for (int i = 0; i < PACE_BUCKETS; i++)
        if (t->bucket_index[i] >= first && t->bucket_index[i] <= last) n += t->bucket_count[i];
    return n > t->pace_min ? n : t->pace_min;
}

/* The task's thread, before a send: wait until fewer are in flight than the broker confirmed in the last window (or a
 * send failed), then take the bound that holds for the next eighth of the window without the lock. */
void pace(pns_task_t *t) {
    int64_t margin = t->pace_window_ns / 8, now;
    pthread_mutex_lock(&t->lock);
    t->waiting = 1;
    for (;;) {
        now = monotonic_ns();
        if (t->error != 0 || t->sent - t->answered - t->held < confirmed_since(t, now - t->pace_window_ns, now)) break;
        struct timespec until; /* an answer wakes it; the timeout only bounds a wait that one could miss */
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 100000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&t->answered_cond, &t->lock, &until);
    }
    t->waiting = 0;
    t->pace_allowed = confirmed_since(t, now - t->pace_window_ns + margin, now);
    t->pace_until_ns = now + margin;
    pthread_mutex_unlock(&t->lock);
}

void on_sent(pulsar_result result, pulsar_message_id_t *id, void *ctx) {
    lane_t *lane = ctx;
    pns_task_t *t = lane->task;
    if (id != NULL) p_pulsar_message_id_free(id);
    pthread_mutex_lock(&t->lock);
    __atomic_add_fetch(&t->answered, 1, __ATOMIC_RELAXED); /* pns_send's pacing reads it without the lock */
    if (result == PULSAR_RESULT_OK) {
        lane->confirmed++;
        if (t->pace_window_ns) count_confirmation(t, monotonic_ns());
    } else if (t->error == 0) {
        __atomic_store_n(&t->error_lane, lane->index, __ATOMIC_RELAXED);
        __atomic_store_n(&t->error, result, __ATOMIC_RELEASE);
    }
    if (t->waiting) pthread_cond_broadcast(&t->answered_cond);
    pthread_mutex_unlock(&t->lock);
    task_release(t);
}


/* Wait until every send is answered, or `timeout_ms` (< 0: without limit) passed; fills *state. After a failed send,
 * rows held in effectivelyOnce batches not cut yet are not waited for: a failed task never flushes them (a cut
 * elsewhere than pns_task_cuts' rule would break the retry's skip), so their answers come only when it closes. */
PAR_EXPORT void pns_wait(void *task, int64_t timeout_ms, pns_state_t *state) {
    pns_task_t *t = task;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    if (timeout_ms >= 0) {
        until.tv_sec += timeout_ms / 1000;
        until.tv_nsec += (timeout_ms % 1000) * 1000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
    }
    pthread_mutex_lock(&t->lock);
    t->waiting = 1;
    while (t->answered < t->sent - (t->error != 0 ? t->held : 0)) {
        int rc = timeout_ms >= 0 ? pthread_cond_timedwait(&t->answered_cond, &t->lock, &until)
                                 : pthread_cond_wait(&t->answered_cond, &t->lock);
        if (rc != 0 && timeout_ms >= 0) break;
    }
    t->waiting = 0;
    state->sent = t->sent;
    state->answered = t->answered;
    state->error = t->error;
    state->error_lane = t->error_lane;
    pthread_mutex_unlock(&t->lock);
}

/* Messages the broker confirmed on destination `lane`. */
PAR_EXPORT int64_t pns_confirmed(void *task, int32_t lane) {
    pns_task_t *t = task;
    if (t == NULL || lane < 0 || lane >= t->lanes_n) return 0;
    pthread_mutex_lock(&t->lock);
    int64_t n = t->lanes[lane].confirmed;
    pthread_mutex_unlock(&t->lock);
    return n;
}
