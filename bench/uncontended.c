/* Uncontended pthread_mutex_lock + unlock pairs on one thread, timed with
 * CLOCK_MONOTONIC. Prints nanoseconds per pair. Run with and without the
 * shim by scripts/bench.sh.
 *
 *   uncontended [PAIRS] [held]   with "held", another mutex is held all
 *                                along: every pair is a nested acquisition
 *                                (a lock-order edge for the shim).
 *   uncontended [PAIRS] sem      sem_trywait + sem_post pairs instead.
 *   uncontended [PAIRS] try      pthread_mutex_trylock + unlock pairs.
 *   uncontended [PAIRS] random   each pair on one of 4,096 mutexes picked
 *                                at random (a fixed sequence), so a
 *                                profiler's per-thread caches miss; the
 *                                picking is timed in the plain run too.
 *
 * With UNCONTENDED_GO=FILE in the environment it waits for FILE to exist
 * before it starts (scripts/bench-attach.sh attaches to it meanwhile). */
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t outer = PTHREAD_MUTEX_INITIALIZER;
static sem_t sem;

#define RANDOM_LOCKS 4096
static pthread_mutex_t many[RANDOM_LOCKS];

/* Pairs on random ones of `many` (xorshift: the same sequence every run). */
static void random_pairs(long n) {
    uint64_t state = 0x9e3779b97f4a7c15ull;
    for (long i = 0; i < n; i++) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        pthread_mutex_t *m = &many[state % RANDOM_LOCKS];
        pthread_mutex_lock(m);
        pthread_mutex_unlock(m);
    }
}

static void try_pairs(long n) {
    for (long i = 0; i < n; i++)
        if (pthread_mutex_trylock(&lock) == 0)
            pthread_mutex_unlock(&lock);
}

static void sem_pairs(long n) {
    for (long i = 0; i < n; i++)
        if (sem_trywait(&sem) == 0)
            sem_post(&sem);
}

/* Prints nanoseconds per pair of `run(n)`, after `warm_up` untimed pairs. */
static void time_pairs(void (*run)(long), long warm_up, long n) {
    struct timespec a, b;
    run(warm_up);
    clock_gettime(CLOCK_MONOTONIC, &a);
    run(n);
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.2f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
}

int main(int argc, char **argv) {
    long pairs = argc > 1 ? atol(argv[1]) : 20000000L;
    int on_sem = argc > 2 && strcmp(argv[2], "sem") == 0;
    int on_many = argc > 2 && strcmp(argv[2], "random") == 0;
    int on_try = argc > 2 && strcmp(argv[2], "try") == 0;
    int held = argc > 2 && !on_sem && !on_many && !on_try;
    const char *go = getenv("UNCONTENDED_GO");
    while (go && access(go, F_OK) != 0)
        usleep(1000);
    if (sem_init(&sem, 0, 1) != 0)
        return 1;
    if (held)
        pthread_mutex_lock(&outer);
    struct timespec a, b;
    if (on_sem) {
        time_pairs(sem_pairs, 1000, pairs);
        return 0;
    }
    if (on_try) {
        time_pairs(try_pairs, 1000, pairs);
        return 0;
    }
    if (on_many) {
        for (int i = 0; i < RANDOM_LOCKS; i++)
            pthread_mutex_init(&many[i], NULL);
        time_pairs(random_pairs, 100000, pairs);
        return 0;
    }
    /* Warm up: the first engagement records the lock and the call site. */
    for (int i = 0; i < 1000; i++) {
        pthread_mutex_lock(&lock);
        pthread_mutex_unlock(&lock);
    }
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < pairs; i++) {
        pthread_mutex_lock(&lock);
        pthread_mutex_unlock(&lock);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
    printf("%.2f\n", ns / pairs);
    if (held)
        pthread_mutex_unlock(&outer);
    return 0;
}
