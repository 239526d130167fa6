/* One wait on a lock, then many uncontended holds of it. The waiter
 * blocks while main holds the lock (main's first hold made it wait: one
 * task switch there); then main locks and unlocks it PAIRS times at
 * another line, which no thread waits for: no task switch there, however
 * far the lock's release sequence comes round (the shim keeps a wait's
 * mark in 15 bits of it). Prints "waiter_waited_ms N" (what the waiter
 * measured of its lock call) and "pairs N". Usage: stale_wait_mark PAIRS */
#include "common.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long long waited_ns;

static void *waiter(void *arg)
{
    (void)arg;
    long long start = now_ns();
    CHECK(pthread_mutex_lock(&lock));
    waited_ns = now_ns() - start;
    CHECK(pthread_mutex_unlock(&lock));
    return NULL;
}

static void hold_while_it_waits(void)
{
    pthread_t t;
    CHECK(pthread_mutex_lock(&lock));
    CHECK(pthread_create(&t, NULL, waiter, NULL));
    sleep_ms(50);
    CHECK(pthread_mutex_unlock(&lock));
    CHECK(pthread_join(t, NULL));
}

static void hold_alone(long pairs)
{
    for (long i = 0; i < pairs; i++) {
        CHECK(pthread_mutex_lock(&lock));
        CHECK(pthread_mutex_unlock(&lock));
    }
}

int main(int argc, char **argv)
{
    long pairs = argc > 1 ? atol(argv[1]) : 100000;
    hold_while_it_waits();
    hold_alone(pairs);
    printf("waiter_waited_ms %lld\npairs %ld\n", waited_ns / 1000000, pairs);
    return 0;
}
