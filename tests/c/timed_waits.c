/* Timed waits whose deadlines the test finds in the trace's events. A
 * holder thread keeps mutex m and rwlock rw until main is about to call
 * clocklock, and 100 ms more (semaphore s stays empty), so every wait below
 * finds them held however slowly the machine runs. Meanwhile main:
 *   - pthread_mutex_timedlock(m, now+50ms REALTIME)      -> ETIMEDOUT
 *   - pthread_rwlock_timedwrlock(rw, now+50ms REALTIME)  -> ETIMEDOUT
 *   - sem_timedwait(s, now+50ms REALTIME)                -> ETIMEDOUT
 *   - pthread_mutex_clocklock(m, MONOTONIC now+5s)       -> 0 once released
 * and prints each deadline in nanoseconds ("<name> <address> <deadline>"). */
#include "common.h"

#include <semaphore.h>
#include <stdatomic.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static sem_t s;
static atomic_int holding;
static atomic_int clocklock_next;

static void *holder(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&m));
    CHECK(pthread_rwlock_wrlock(&rw));
    atomic_store(&holding, 1);
    while (!atomic_load(&clocklock_next))
        sleep_ms(1);
    sleep_ms(100);
    CHECK(pthread_rwlock_unlock(&rw));
    CHECK(pthread_mutex_unlock(&m));
    return NULL;
}

static struct timespec in_ms(clockid_t clock, long ms)
{
    struct timespec t;
    clock_gettime(clock, &t);
    t.tv_nsec += (ms % 1000) * 1000000L;
    t.tv_sec += ms / 1000 + t.tv_nsec / 1000000000L;
    t.tv_nsec %= 1000000000L;
    return t;
}

static unsigned long long ns(struct timespec t)
{
    return (unsigned long long)t.tv_sec * 1000000000ULL + (unsigned long long)t.tv_nsec;
}

static void expect(const char *what, int rc, int want)
{
    if (rc != want) {
        fprintf(stderr, "%s: got %d, want %d\n", what, rc, want);
        exit(1);
    }
}

int main(void)
{
    CHECK(sem_init(&s, 0, 0));
    pthread_t t;
    CHECK(pthread_create(&t, NULL, holder, NULL));
    while (!atomic_load(&holding))
        ;
    struct timespec d = in_ms(CLOCK_REALTIME, 50);
    expect("timedlock", pthread_mutex_timedlock(&m, &d), ETIMEDOUT);
    printf("timedlock %p %llu\n", (void *)&m, ns(d));
    d = in_ms(CLOCK_REALTIME, 50);
    expect("timedwrlock", pthread_rwlock_timedwrlock(&rw, &d), ETIMEDOUT);
    printf("timedwrlock %p %llu\n", (void *)&rw, ns(d));
    d = in_ms(CLOCK_REALTIME, 50);
    expect("sem_timedwait", sem_timedwait(&s, &d) == -1 ? errno : 0, ETIMEDOUT);
    printf("sem_timedwait %p %llu\n", (void *)&s, ns(d));
    d = in_ms(CLOCK_MONOTONIC, 5000);
    atomic_store(&clocklock_next, 1);
    expect("clocklock", pthread_mutex_clocklock(&m, CLOCK_MONOTONIC, &d), 0);
    printf("clocklock %p %llu\n", (void *)&m, ns(d));
    CHECK(pthread_mutex_unlock(&m));
    CHECK(pthread_join(t, NULL));
    CHECK(sem_destroy(&s));
    return 0;
}
