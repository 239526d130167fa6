/* Threads one after another, each taking the same two static mutexes at
 * the same two lines: a thread's per-thread state (its lane, its caches,
 * lean mode's table of lines) is handed to the next, which must count into
 * its own records, not the last thread's.
 *
 *   lane_reuse THREADS   thread i (from 1) takes `first` i times, then
 *                        `second` 10 * i times; each is joined before the
 *                        next starts.
 *
 * Output: "threads <THREADS>", then "thread<i> <acquisitions>". */
#include "common.h"

static pthread_mutex_t first = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t second = PTHREAD_MUTEX_INITIALIZER;

static void *worker(void *arg)
{
    long n = (long)arg;
    for (long i = 0; i < n; i++) {
        CHECK(pthread_mutex_lock(&first)); /* @reuse-first */
        CHECK(pthread_mutex_unlock(&first));
    }
    for (long i = 0; i < 10 * n; i++) {
        CHECK(pthread_mutex_lock(&second)); /* @reuse-second */
        CHECK(pthread_mutex_unlock(&second));
    }
    return NULL;
}

int main(int argc, char **argv)
{
    long threads = argc > 1 ? atol(argv[1]) : 0;
    if (threads <= 0) {
        fprintf(stderr, "usage: lane_reuse THREADS\n");
        return 2;
    }
    printf("threads %ld\n", threads);
    for (long i = 1; i <= threads; i++) {
        pthread_t t;
        CHECK(pthread_create(&t, NULL, worker, (void *)i));
        CHECK(pthread_join(t, NULL));
        printf("thread%ld %ld\n", i, 11 * i);
    }
    return 0;
}
