/* Data-level suitability, built with `locksuit cc`: two threads take one
 * lock at one line, each to count in a slot of its own, and every 100th
 * time sleep 2 ms holding it after that access, so the other thread waits
 * for the lock then. An engagement another thread waited for is on the
 * waited-for side of its line's ratios, however late in it the wait
 * began. Prints "slot_sum N" (2 * ROUNDS). */
#include "common.h"

#define ROUNDS 2000

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    long count;
    char pad[56]; /* one cache line each */
} slots[2];

static void *worker(void *arg)
{
    int me = (int)(long)arg;
    for (int i = 0; i < ROUNDS; i++) {
        CHECK(pthread_mutex_lock(&lock));
        slots[me].count++;
        if (i % 100 == 50)
            sleep_ms(2);
        CHECK(pthread_mutex_unlock(&lock));
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
    printf("slot_sum %ld\n", slots[0].count + slots[1].count);
    return 0;
}
