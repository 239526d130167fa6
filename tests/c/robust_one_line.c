/* Robust and priority-inheriting mutexes taken many times at one line,
 * so that the shim caches the call, then (the robust one) left by a thread
 * that died holding it and made not recoverable, taken at that same line:
 * the shim must never try such a mutex first (glibc's trylock of a mutex
 * made not recoverable leaves it locked, and a PI trylock goes to the
 * kernel), however often it saw the call before.
 *
 * Output: one "<step> <rc>" line per step; on stderr the addresses of the
 * robust mutex m and the PI mutex p. Each is taken 100 times by lock and
 * 100 times by trylock before the rest. An alarm ends a program that
 * hangs. */
#include "common.h"

#include <unistd.h>

static pthread_mutex_t m, p;

static int lock_here(pthread_mutex_t *mutex)
{
    return pthread_mutex_lock(mutex); /* @one-line-lock */
}

static int try_here(pthread_mutex_t *mutex)
{
    return pthread_mutex_trylock(mutex); /* @one-line-trylock */
}

static void *die_holding(void *arg)
{
    CHECK(lock_here(arg));
    return NULL; /* ends holding it */
}

static void make(pthread_mutex_t *mutex, int robust, int protocol)
{
    pthread_mutexattr_t attr;
    CHECK(pthread_mutexattr_init(&attr));
    if (robust)
        CHECK(pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST));
    CHECK(pthread_mutexattr_setprotocol(&attr, protocol));
    CHECK(pthread_mutex_init(mutex, &attr));
    CHECK(pthread_mutexattr_destroy(&attr));
}

static void take_often(const char *name, pthread_mutex_t *mutex)
{
    for (int i = 0; i < 100; i++) {
        CHECK(lock_here(mutex));
        CHECK(pthread_mutex_unlock(mutex));
    }
    for (int i = 0; i < 100; i++) {
        CHECK(try_here(mutex));
        CHECK(pthread_mutex_unlock(mutex));
    }
    printf("%s-taken 200\n", name);
}

int main(void)
{
    alarm(20);
    fprintf(stderr, "m %p\np %p\n", (void *)&m, (void *)&p);
    make(&m, 1, PTHREAD_PRIO_NONE);
    make(&p, 0, PTHREAD_PRIO_INHERIT);
    take_often("robust", &m);
    take_often("pi", &p);

    pthread_t t;
    CHECK(pthread_create(&t, NULL, die_holding, &m));
    CHECK(pthread_join(t, NULL));
    printf("owner-died %d\n", lock_here(&m));
    printf("unlock %d\n", pthread_mutex_unlock(&m));
    for (int i = 0; i < 3; i++)
        printf("lock %d\n", lock_here(&m));
    printf("trylock %d\n", try_here(&m));
    return 0;
}
