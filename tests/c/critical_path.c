/* Programs of known structure for the critical path's predicted gains
 * (issue 39). The work is sleeping, so that a busy machine changes it
 * little; every program prints "run-ns N", the time from before its
 * threads were made to after they were joined, measured by itself.
 *
 *   critical_path on-path base|removed
 *       3 workers, 15 rounds each: lock L, work 2 ms, unlock, work 1 ms.
 *       L serialises them: the run is about 3 x 15 x 2 ms. "removed" does
 *       the same work without L: about 15 x 3 ms.
 *   critical_path off-path base|removed
 *       one worker works 120 ms on its own (6 x 20 ms); two others, 10 rounds each:
 *       lock L, work 3 ms, unlock, work 0.5 ms. They wait long for L, but
 *       all of it overlaps the first worker's work: "removed" (no L) ends
 *       no sooner.
 *   critical_path series base|removed
 *       3 workers, 15 rounds each: lock A, work 2 ms, unlock; lock B, work
 *       1 ms, unlock; work 0.5 ms. A is the bottleneck; "removed" takes A
 *       out, and B (half as long) becomes it.
 *   critical_path notified base|removed
 *       2 workers as on-path (15 rounds: lock L, work 2 ms, unlock, work
 *       1 ms), each signalling a condition when done; a third thread
 *       waits on it for both, then works 20 ms. The path goes from the
 *       waiter's end through its condition wait into the worker whose
 *       signal ended it: "removed" (no L) ends sooner by what L cost the
 *       workers.
 *   critical_path barrier base|removed
 *       2 workers, 20 rounds, a barrier after each: worker 0 works 3 ms in
 *       even rounds and 1 ms in odd ones, worker 1 the other way round.
 *       With the barrier each round takes 3 ms; "removed" (no barrier)
 *       lets each work its 40 ms alone.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t lock_l = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t lock_a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t lock_b = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t barrier;
static int removed;

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Work: `us` microseconds, slept. */
static void work(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static void take(pthread_mutex_t *m) {
    if (!removed)
        pthread_mutex_lock(m);
}

static void give(pthread_mutex_t *m) {
    if (!removed)
        pthread_mutex_unlock(m);
}

static void *on_path(void *arg) {
    (void)arg;
    for (int i = 0; i < 15; i++) {
        take(&lock_l);
        work(2000);
        give(&lock_l);
        work(1000);
    }
    return NULL;
}

static void *alone(void *arg) {
    (void)arg;
    for (int i = 0; i < 6; i++)
        work(20000);
    return NULL;
}

static void *off_path(void *arg) {
    (void)arg;
    for (int i = 0; i < 10; i++) {
        take(&lock_l);
        work(3000);
        give(&lock_l);
        work(500);
    }
    return NULL;
}

static void *series(void *arg) {
    (void)arg;
    for (int i = 0; i < 15; i++) {
        take(&lock_a);
        work(2000);
        give(&lock_a);
        take(&lock_b);
        work(1000);
        give(&lock_b);
        work(500);
    }
    return NULL;
}

static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;
static int done;

static void *notifying(void *arg) {
    on_path(arg);
    pthread_mutex_lock(&done_lock);
    done++;
    pthread_cond_signal(&done_cond);
    pthread_mutex_unlock(&done_lock);
    return NULL;
}

static void *notified(void *arg) {
    (void)arg;
    pthread_mutex_lock(&done_lock);
    while (done < 2)
        pthread_cond_wait(&done_cond, &done_lock);
    pthread_mutex_unlock(&done_lock);
    work(20000);
    return NULL;
}

static void *rounds(void *arg) {
    long me = (long)arg;
    for (int i = 0; i < 20; i++) {
        work((i % 2 == me) ? 3000 : 1000);
        if (!removed)
            pthread_barrier_wait(&barrier);
    }
    return NULL;
}

static void run(void *(*f)(void *), int n, void *(*first)(void *)) {
    pthread_t t[8];
    for (long i = 0; i < n; i++)
        pthread_create(&t[i], NULL, (i == 0 && first) ? first : f, (void *)i);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
}

int main(int argc, char **argv) {
    if (argc != 3 || (strcmp(argv[2], "base") && strcmp(argv[2], "removed"))) {
        fprintf(stderr, "usage: %s on-path|off-path|series|notified|barrier base|removed\n",
                argv[0]);
        return 2;
    }
    removed = !strcmp(argv[2], "removed");
    const char *what = argv[1];
    long long start = now_ns();
    if (!strcmp(what, "on-path")) {
        run(on_path, 3, NULL);
    } else if (!strcmp(what, "off-path")) {
        run(off_path, 3, alone);
    } else if (!strcmp(what, "series")) {
        run(series, 3, NULL);
    } else if (!strcmp(what, "notified")) {
        run(notifying, 3, notified);
    } else if (!strcmp(what, "barrier")) {
        pthread_barrier_init(&barrier, NULL, 2);
        run(rounds, 2, NULL);
    } else {
        fprintf(stderr, "unknown program %s\n", what);
        return 2;
    }
    printf("run-ns %lld\n", now_ns() - start);
    return 0;
}
