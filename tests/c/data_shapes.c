/* Data-level suitability, built with `locksuit cc`: two locks whose data
 * says what they are worth.
 * - pair_lock guards each thread's own tally: no two threads touch the
 *   same data under it, yet they wait for it (disjoint-data). main holds
 *   it while the threads start, until each is blocked on it, so they
 *   surely wait.
 * - config_lock guards a table main fills before the threads start; under
 *   the lock the threads only read it (read-only-sharing).
 * - status_lock: the threads read a table under it too, but the first
 *   thread, halfway, also writes one entry of it holding no lock: not
 *   read-only, whatever the lock saw.
 * - watch_lock: the same, but the write comes from a thread that never
 *   takes a lock at all, started after the workers ended (so its first
 *   store is also its first call into the shim: the access gate must be
 *   open for it from the thread's start).
 * - rare_lock: the threads read a table under it, and the first thread,
 *   in its 502nd engagement only, writes an entry of it under the lock:
 *   not read-only.
 *
 * Prints "tally_sum N" (THREADS * ROUNDS) and "config_sum N". */
#include "common.h"

#define THREADS 3
#define ROUNDS 1000

static pthread_mutex_t pair_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t config_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    long n;
    char pad[56];
} tallies[THREADS];
static int config[16];
static pthread_mutex_t status_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int status[16];
static volatile int tids[THREADS];
static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int watched[16];
static pthread_mutex_t rare_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int rare[16];

static void *lockless_writer(void *arg)
{
    (void)arg;
    watched[3] = 1;
    return NULL;
}

static void *worker(void *arg)
{
    int me = (int)(long)arg;
    tids[me] = gettid_now();
    long sum = 0;
    for (int i = 0; i < ROUNDS; i++) {
        CHECK(pthread_mutex_lock(&pair_lock));
        tallies[me].n++;
        CHECK(pthread_mutex_unlock(&pair_lock));
        CHECK(pthread_mutex_lock(&config_lock));
        sum += config[i % 16];
        CHECK(pthread_mutex_unlock(&config_lock));
        CHECK(pthread_mutex_lock(&status_lock));
        int seen = status[i % 16];
        CHECK(pthread_mutex_unlock(&status_lock));
        CHECK(pthread_mutex_lock(&watch_lock));
        sum += watched[i % 16];
        CHECK(pthread_mutex_unlock(&watch_lock));
        CHECK(pthread_mutex_lock(&rare_lock));
        sum += rare[i % 16];
        if (me == 0 && i == 501)
            rare[i % 16] = 0;
        CHECK(pthread_mutex_unlock(&rare_lock));
        /* A racy write, on purpose: to an entry read under the lock. */
        if (me == 0 && i == ROUNDS / 2)
            status[i % 16] = seen + 1;
    }
    return (void *)sum;
}

int main(void)
{
    for (int i = 0; i < 16; i++)
        config[i] = i;
    pthread_t t[THREADS];
    CHECK(pthread_mutex_lock(&pair_lock));
    for (long i = 0; i < THREADS; i++) {
        CHECK(pthread_create(&t[i], NULL, worker, (void *)i));
        while (tids[i] == 0 || !in_futex_wait(tids[i]))
            sleep_ms(1);
    }
    CHECK(pthread_mutex_unlock(&pair_lock));
    long tally = 0, config_sum = 0;
    for (int i = 0; i < THREADS; i++) {
        void *sum;
        CHECK(pthread_join(t[i], &sum));
        config_sum += (long)sum;
        tally += tallies[i].n;
    }
    pthread_t writer;
    CHECK(pthread_create(&writer, NULL, lockless_writer, NULL));
    CHECK(pthread_join(writer, NULL));
    printf("tally_sum %ld\nconfig_sum %ld\n", tally, config_sum);
    return 0;
}
