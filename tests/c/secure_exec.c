/* Run setuid (secure execution): the shim, linked in rather than preloaded
 * (the loader ignores LD_PRELOAD paths then), must record nothing and change
 * nothing. Two threads share a mutex and a condition variable; prints the
 * totals, and on stderr whether the process runs in secure mode. */
#include "common.h"

#include <sys/auxv.h>

#define ITERS 1000

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static long counter;
static int ready;

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < ITERS; i++) {
        CHECK(pthread_mutex_lock(&lock));
        counter++;
        CHECK(pthread_mutex_unlock(&lock));
    }
    CHECK(pthread_mutex_lock(&lock));
    ready = 1;
    CHECK(pthread_cond_signal(&changed));
    CHECK(pthread_mutex_unlock(&lock));
    return NULL;
}

int main(void)
{
    pthread_t t;
    CHECK(pthread_create(&t, NULL, worker, NULL));
    CHECK(pthread_mutex_lock(&lock));
    while (!ready)
        CHECK(pthread_cond_wait(&changed, &lock));
    CHECK(pthread_mutex_unlock(&lock));
    CHECK(pthread_join(t, NULL));
    printf("counter %ld\n", counter);
    fprintf(stderr, "secure %lu\n", getauxval(AT_SECURE));
    return 0;
}
