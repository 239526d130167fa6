/* Ground truth for condition-variable counts.
 *
 * One mutex M and three conds:
 *   handshake  H (12) rounds: the consumer thread, holding M, sets `waiting`
 *              and waits on `handshake` until `ready`; main (the producer)
 *              waits for `waiting`, then takes M (possible only once the
 *              consumer is inside pthread_cond_wait, which released M), sets
 *              `ready`, clears `waiting` and signals: every signal finds a
 *              waiter. The consumer counts its pthread_cond_wait calls.
 *   timeout    (CLOCK_MONOTONIC, made with pthread_cond_init) T (20)
 *              pthread_cond_timedwait calls with a 1 ms timeout, nobody
 *              signals: every one returns ETIMEDOUT.
 *   nobody     B (9) pthread_cond_broadcast calls, nobody ever waits.
 *
 * M is acquired: H by the consumer + H by the producer + 1 before the timed
 * waits, plus one re-acquisition per returned wait (H + T).
 *
 * Output: "mutex <addr>", "handshake <addr>", "timeout <addr>",
 * "nobody <addr>", "consumer-waits <n>", "timeouts <n>", "signals <n>",
 * "broadcasts <n>". */
#include "common.h"

#include <stdatomic.h>

#define H 12
#define T 20
#define B 9

static pthread_mutex_t M = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t handshake = PTHREAD_COND_INITIALIZER;
static pthread_cond_t timeout_cond;
static pthread_cond_t nobody = PTHREAD_COND_INITIALIZER;

static atomic_int waiting;
static int ready; /* protected by M */
static int consumer_waits;

static void *consumer(void *arg)
{
    (void)arg;
    for (int i = 0; i < H; i++) {
        CHECK(pthread_mutex_lock(&M)); /* @consumer-lock */
        atomic_store(&waiting, 1);
        while (!ready) {
            consumer_waits++;
            CHECK(pthread_cond_wait(&handshake, &M)); /* @consumer-wait */
        }
        ready = 0;
        CHECK(pthread_mutex_unlock(&M));
    }
    return NULL;
}

int main(void)
{
    pthread_condattr_t attr;
    CHECK(pthread_condattr_init(&attr));
    CHECK(pthread_condattr_setclock(&attr, CLOCK_MONOTONIC));
    CHECK(pthread_cond_init(&timeout_cond, &attr));
    CHECK(pthread_condattr_destroy(&attr));

    /* Handshakes. */
    pthread_t th;
    CHECK(pthread_create(&th, NULL, consumer, NULL));
    int signals = 0;
    for (int i = 0; i < H; i++) {
        while (!atomic_load(&waiting))
            sched_yield();
        CHECK(pthread_mutex_lock(&M)); /* @producer-lock */
        ready = 1;
        atomic_store(&waiting, 0);
        CHECK(pthread_cond_signal(&handshake)); /* @producer-signal */
        signals++;
        CHECK(pthread_mutex_unlock(&M));
    }
    CHECK(pthread_join(th, NULL));

    /* Timed waits nobody ends. */
    int timeouts = 0;
    CHECK(pthread_mutex_lock(&M)); /* @timed-lock */
    for (int i = 0; i < T; i++) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        int rc = pthread_cond_timedwait(&timeout_cond, &M, &ts); /* @timed-wait */
        if (rc != ETIMEDOUT) {
            fprintf(stderr, "timedwait %d returned %d, not ETIMEDOUT\n", i, rc);
            return 1;
        }
        timeouts++;
    }
    CHECK(pthread_mutex_unlock(&M));

    /* Broadcasts to nobody. */
    int broadcasts = 0;
    for (int i = 0; i < B; i++) {
        CHECK(pthread_cond_broadcast(&nobody)); /* @broadcast */
        broadcasts++;
    }

    printf("mutex %p\n", (void *)&M);
    printf("handshake %p\n", (void *)&handshake);
    printf("timeout %p\n", (void *)&timeout_cond);
    printf("nobody %p\n", (void *)&nobody);
    printf("consumer-waits %d\n", consumer_waits);
    printf("timeouts %d\n", timeouts);
    printf("signals %d\n", signals);
    printf("broadcasts %d\n", broadcasts);
    return 0;
}
