/* Data-level suitability, built with `locksuit cc`: one global lock taken
 * at two lines. bump_shared() guards a counter every thread updates (the
 * lock is needed there); bump_own() guards each thread's own slot, which
 * no other thread touches (private-data-under-lock: split the lock).
 *
 * Prints "shared_counter N" and "slot_sum N" (both THREADS * ROUNDS).
 * With the argument "hang" it prints "ready" instead once the work is
 * done, and waits to be killed. */
#include "common.h"

#define THREADS 4
#define ROUNDS 2000

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static long shared_counter;
static struct {
    long count;
    char pad[56]; /* one cache line each */
} slots[THREADS];

static void bump_shared(void)
{
    CHECK(pthread_mutex_lock(&table_lock));
    shared_counter++;
    CHECK(pthread_mutex_unlock(&table_lock));
}

static void bump_own(int me)
{
    CHECK(pthread_mutex_lock(&table_lock));
    slots[me].count++;
    CHECK(pthread_mutex_unlock(&table_lock));
}

static void *worker(void *arg)
{
    int me = (int)(long)arg;
    for (int i = 0; i < ROUNDS; i++) {
        bump_shared();
        bump_own(me);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, worker, (void *)i));
    long sum = 0;
    for (int i = 0; i < THREADS; i++) {
        CHECK(pthread_join(t[i], NULL));
        sum += slots[i].count;
    }
    if (argc > 1 && strcmp(argv[1], "hang") == 0) {
        /* For the test that kills it: the work is done, the exit is not. */
        printf("ready\n");
        fflush(stdout);
        for (;;)
            pause();
    }
    printf("shared_counter %ld\nslot_sum %ld\n", shared_counter, sum);
    return 0;
}
