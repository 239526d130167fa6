/* Many threads alive at once, each writing several blocks of events (run
 * with LOCKSUIT_EVENTS=all): THREADS threads each take and release one
 * mutex ROUNDS times, then wait at a barrier until all are done, so none
 * exits (and frees its lane) before the others have written everything.
 *
 *   many_writers [THREADS] [ROUNDS]   (default 64 400)
 *
 * Prints "pairs N" (THREADS * ROUNDS). */
#include "common.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t all_done;
static long rounds;
static long pairs;

static void *writer(void *arg)
{
    (void)arg;
    for (long i = 0; i < rounds; i++) {
        CHECK(pthread_mutex_lock(&lock));
        pairs++;
        CHECK(pthread_mutex_unlock(&lock));
    }
    pthread_barrier_wait(&all_done);
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 64;
    rounds = argc > 2 ? atol(argv[2]) : 400;
    pthread_t *t = calloc((size_t)threads, sizeof *t);
    if (!t)
        return 1;
    CHECK(pthread_barrier_init(&all_done, NULL, (unsigned)threads));
    for (int i = 0; i < threads; i++)
        CHECK(pthread_create(&t[i], NULL, writer, NULL));
    for (int i = 0; i < threads; i++)
        CHECK(pthread_join(t[i], NULL));
    printf("pairs %ld\n", pairs);
    free(t);
    return 0;
}
