/* A small, well-formed program whose trace the bad-input tests mangle.
 * Two threads share one lock; each also has a private one. */
#include "common.h"

#define ITER 200

static pthread_mutex_t shared = PTHREAD_MUTEX_INITIALIZER;
static long counter;

static void *worker(void *arg)
{
    (void)arg;
    pthread_mutex_t mine;
    CHECK(pthread_mutex_init(&mine, NULL));
    for (int i = 0; i < ITER; i++) {
        CHECK(pthread_mutex_lock(&mine));
        CHECK(pthread_mutex_unlock(&mine));
        CHECK(pthread_mutex_lock(&shared));
        counter++;
        CHECK(pthread_mutex_unlock(&shared));
    }
    CHECK(pthread_mutex_destroy(&mine));
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    CHECK(pthread_create(&a, NULL, worker, NULL));
    CHECK(pthread_create(&b, NULL, worker, NULL));
    CHECK(pthread_join(a, NULL));
    CHECK(pthread_join(b, NULL));
    printf("counter %ld\n", counter);
    return counter == 2 * ITER ? 0 : 1;
}
