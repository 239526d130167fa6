/* Ground truth for robust mutexes whose owner died.
 *
 * A thread locks the robust mutex `m` and ends holding it. main's lock then
 * returns EOWNERDEAD; main unlocks it without pthread_mutex_consistent, so
 * it is not recoverable. From then on every acquisition must return
 * ENOTRECOVERABLE at once: lock, timedlock and clocklock by main, a lock by
 * a second thread, and last a trylock (glibc's own trylock leaves such a
 * mutex locked, so nothing may follow it). A second robust mutex `r` is made
 * consistent instead and works on. The same for a robust error-checking
 * mutex `e`. An alarm ends a program that hangs.
 *
 * Output: one "<call> <rc>" line per call, in order; on stderr the
 * addresses of m, e and r. */
#include "common.h"

#include <unistd.h>

static pthread_mutex_t m, r, e;

static void *die_holding(void *arg)
{
    CHECK(pthread_mutex_lock((pthread_mutex_t *)arg));
    return NULL; /* ends holding it */
}

static void *second_locker(void *arg)
{
    int rc = pthread_mutex_lock((pthread_mutex_t *)arg);
    return (void *)(long)rc;
}

static void make_robust(pthread_mutex_t *mutex, int type)
{
    pthread_mutexattr_t attr;
    CHECK(pthread_mutexattr_init(&attr));
    CHECK(pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST));
    CHECK(pthread_mutexattr_settype(&attr, type));
    CHECK(pthread_mutex_init(mutex, &attr));
    CHECK(pthread_mutexattr_destroy(&attr));
}

static void orphan(pthread_mutex_t *mutex)
{
    pthread_t t;
    CHECK(pthread_create(&t, NULL, die_holding, mutex));
    CHECK(pthread_join(t, NULL));
}

static void deadline(struct timespec *ts, clockid_t clock)
{
    clock_gettime(clock, ts);
    ts->tv_nsec += 20 * 1000 * 1000;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

static void not_recoverable(const char *name, pthread_mutex_t *mutex)
{
    struct timespec ts;
    orphan(mutex);
    printf("%s-lock-owner-died %d\n", name, pthread_mutex_lock(mutex));
    printf("%s-unlock %d\n", name, pthread_mutex_unlock(mutex));
    printf("%s-lock %d\n", name, pthread_mutex_lock(mutex));
    deadline(&ts, CLOCK_REALTIME);
    printf("%s-timedlock %d\n", name, pthread_mutex_timedlock(mutex, &ts));
    deadline(&ts, CLOCK_MONOTONIC);
    printf("%s-clocklock %d\n", name, pthread_mutex_clocklock(mutex, CLOCK_MONOTONIC, &ts));
    printf("%s-lock-again %d\n", name, pthread_mutex_lock(mutex));
    pthread_t t;
    void *rc;
    CHECK(pthread_create(&t, NULL, second_locker, mutex));
    CHECK(pthread_join(t, &rc));
    printf("%s-other-thread-lock %ld\n", name, (long)rc);
    printf("%s-trylock %d\n", name, pthread_mutex_trylock(mutex));
}

int main(void)
{
    alarm(20);
    fprintf(stderr, "m %p\ne %p\nr %p\n", (void *)&m, (void *)&e, (void *)&r);
    make_robust(&m, PTHREAD_MUTEX_NORMAL);
    make_robust(&e, PTHREAD_MUTEX_ERRORCHECK);
    make_robust(&r, PTHREAD_MUTEX_NORMAL);
    not_recoverable("normal", &m);
    not_recoverable("errorcheck", &e);

    /* Made consistent: it works on. */
    orphan(&r);
    printf("consistent-lock-owner-died %d\n", pthread_mutex_lock(&r));
    printf("consistent %d\n", pthread_mutex_consistent(&r));
    printf("consistent-unlock %d\n", pthread_mutex_unlock(&r));
    for (int i = 0; i < 10; i++) {
        CHECK(pthread_mutex_lock(&r));
        CHECK(pthread_mutex_unlock(&r));
    }
    printf("consistent-trylock %d\n", pthread_mutex_trylock(&r));
    printf("consistent-unlock-again %d\n", pthread_mutex_unlock(&r));
    return 0;
}
