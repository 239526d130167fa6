/* Data-level suitability, built with `locksuit cc`: false sharing.
 * Two threads each count in a slot of their own, under a lock of their
 * own, ROUNDS times:
 * - counters[2]: the two slots are 8 bytes apart, in one cache line, so
 *   each increment takes the line from the other thread's core (false
 *   sharing);
 * - padded[2]: each slot on a cache line of its own (no false sharing).
 *
 * Prints "counters N" and "padded N" (2 * ROUNDS each). */
#include "common.h"

#define ROUNDS 2000

static pthread_mutex_t locks[2] = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER};
static long counters[2] __attribute__((aligned(64)));
static struct {
    long n;
    char pad[56];
} padded[2] __attribute__((aligned(64)));

static void *worker(void *arg)
{
    int me = (int)(long)arg;
    for (int i = 0; i < ROUNDS; i++) {
        CHECK(pthread_mutex_lock(&locks[me]));
        counters[me]++;
        padded[me].n++;
        CHECK(pthread_mutex_unlock(&locks[me]));
    }
    return NULL;
}

int main(void)
{
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, worker, (void *)i));
    for (int i = 0; i < 2; i++)
        CHECK(pthread_join(t[i], NULL));
    printf("counters %ld\npadded %ld\n", counters[0] + counters[1], padded[0].n + padded[1].n);
    return 0;
}
