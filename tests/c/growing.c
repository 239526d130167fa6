/* A program whose trace keeps growing while it runs, for reading a live
 * trace (record it with LOCKSUIT_EVENTS=all so every engagement is an event).
 *
 *   growing PAIRS   two threads, each in batches: a new heap mutex (a new
 *                   lock record), locked and unlocked PAIRS times, then a
 *                   1 ms pause; until standard input reaches end of file,
 *                   or 60 s have passed.
 *
 * Output: "ready" once both threads have finished a batch (the trace
 * exists and is growing), then at the end "batches <N>". Exits 0. */
#include "common.h"

#include <stdatomic.h>
#include <unistd.h>

#define THREADS 2
#define MAX_SECONDS 60

static atomic_int stop;
static atomic_int started;
static atomic_long batches;
static int pairs;

static void *worker(void *arg)
{
    (void)arg;
    int first = 1;
    while (!atomic_load(&stop)) {
        pthread_mutex_t *lock = malloc(sizeof *lock); /* never freed: a new address each batch */
        if (!lock) {
            perror("malloc");
            exit(1);
        }
        CHECK(pthread_mutex_init(lock, NULL));
        for (int i = 0; i < pairs; i++) {
            CHECK(pthread_mutex_lock(lock));
            CHECK(pthread_mutex_unlock(lock));
        }
        atomic_fetch_add(&batches, 1);
        if (first) {
            first = 0;
            atomic_fetch_add(&started, 1);
        }
        sleep_ms(1);
    }
    return NULL;
}

/* Ends the run when standard input closes. */
static void *watch_stdin(void *arg)
{
    (void)arg;
    char buf[64];
    while (read(0, buf, sizeof buf) > 0)
        ;
    atomic_store(&stop, 1);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2 || (pairs = atoi(argv[1])) < 1) {
        fprintf(stderr, "usage: growing PAIRS\n");
        return 2;
    }
    pthread_t threads[THREADS], watcher;
    CHECK(pthread_create(&watcher, NULL, watch_stdin, NULL));
    CHECK(pthread_detach(watcher));
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&threads[i], NULL, worker, NULL));
    long long start = now_ns();
    while (atomic_load(&started) < THREADS)
        sleep_ms(1);
    printf("ready\n");
    fflush(stdout);
    while (!atomic_load(&stop) && now_ns() - start < MAX_SECONDS * 1000000000LL)
        sleep_ms(5);
    atomic_store(&stop, 1);
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_join(threads[i], NULL));
    printf("batches %ld\n", atomic_load(&batches));
    return 0;
}
