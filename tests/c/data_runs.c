/* The access gate's test per run (built with `locksuit cc`): one thread,
 * ROUNDS times, increments a counter under a lock, then, holding none,
 * reads six globals in one straight run of code. The unlock opens the
 * gate; the first of the six loads asks the shim, which shuts it (the
 * thread holds no lock), and the other five must make no call: about 2
 * load calls a round (the counter's and the first global's), not 7.
 *
 * Prints "sum N". */
#include "common.h"

#define ROUNDS 20000

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
long counter, g1 = 1, g2 = 2, g3 = 3, g4 = 4, g5 = 5, g6 = 6;

static void *worker(void *arg)
{
    (void)arg;
    long sum = 0;
    for (int i = 0; i < ROUNDS; i++) {
        CHECK(pthread_mutex_lock(&lock));
        counter++;
        CHECK(pthread_mutex_unlock(&lock));
        sum += g1 * 3 + g2 * 5 + g3 * 7 + g4 * 11 + g5 * 13 + g6 * 17;
    }
    return (void *)sum;
}

int main(void)
{
    pthread_t t;
    void *sum;
    CHECK(pthread_create(&t, NULL, worker, NULL));
    CHECK(pthread_join(t, &sum));
    printf("sum %ld\ncounter %ld\n", (long)sum, counter);
    return 0;
}
