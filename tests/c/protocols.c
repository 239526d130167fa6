/* Ground truth for priority-inheritance (PI) and priority-protect (PP)
 * mutexes, whose trylock goes to the kernel, so the shim must call their
 * blocking lock directly.
 *
 * For each protocol: init, lock, a trylock while held (EBUSY), unlock, a
 * lock by a second thread while main holds it, a timed lock, then 100
 * lock/unlock pairs. A PP mutex may fail to lock without the right to raise
 * priority: whatever each call returns is printed, and must be the same
 * with and without the shim. An alarm ends a program that hangs.
 *
 * Output: one "<protocol>-<call> <rc>" line per call, and
 * "<protocol>-locked <n>": how many acquisitions succeeded. On stderr the
 * mutexes' addresses. */
#include "common.h"

struct subject {
    pthread_mutex_t mutex;
    int waiter_tid; /* set by the second thread just before it locks */
    int returned;   /* set once its lock returned */
};

static void *second_locker(void *arg)
{
    struct subject *s = arg;
    __atomic_store_n(&s->waiter_tid, gettid_now(), __ATOMIC_SEQ_CST);
    int rc = pthread_mutex_lock(&s->mutex);
    __atomic_store_n(&s->returned, 1, __ATOMIC_SEQ_CST);
    if (rc == 0)
        rc = pthread_mutex_unlock(&s->mutex);
    return (void *)(long)rc;
}

static void exercise(const char *name, struct subject *s, int protocol)
{
    pthread_mutexattr_t attr;
    int locked = 0;
    CHECK(pthread_mutexattr_init(&attr));
    CHECK(pthread_mutexattr_setprotocol(&attr, protocol));
    if (protocol == PTHREAD_PRIO_PROTECT)
        printf("%s-setprioceiling %d\n", name,
               pthread_mutexattr_setprioceiling(&attr, sched_get_priority_min(SCHED_FIFO)));
    printf("%s-init %d\n", name, pthread_mutex_init(&s->mutex, &attr));
    CHECK(pthread_mutexattr_destroy(&attr));

    int rc = pthread_mutex_lock(&s->mutex);
    printf("%s-lock %d\n", name, rc);
    locked += rc == 0;
    if (rc == 0) {
        printf("%s-trylock-held %d\n", name, pthread_mutex_trylock(&s->mutex));
        printf("%s-unlock %d\n", name, pthread_mutex_unlock(&s->mutex));
    }

    rc = pthread_mutex_lock(&s->mutex);
    printf("%s-lock-again %d\n", name, rc);
    locked += rc == 0;
    pthread_t t;
    void *other;
    CHECK(pthread_create(&t, NULL, second_locker, s));
    int tid;
    while ((tid = __atomic_load_n(&s->waiter_tid, __ATOMIC_SEQ_CST)) == 0)
        sched_yield();
    /* Main unlocks once the thread is blocked behind it (or its lock
     * failed at once), so a successful lock by it always waited. */
    while (!in_futex_wait(tid) && !__atomic_load_n(&s->returned, __ATOMIC_SEQ_CST))
        sleep_ms(1);
    if (rc == 0)
        CHECK(pthread_mutex_unlock(&s->mutex));
    CHECK(pthread_join(t, &other));
    printf("%s-other-thread-lock %ld\n", name, (long)other);
    locked += other == NULL;

    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 1;
    rc = pthread_mutex_timedlock(&s->mutex, &ts);
    printf("%s-timedlock %d\n", name, rc);
    if (rc == 0) {
        locked++;
        CHECK(pthread_mutex_unlock(&s->mutex));
    }

    int failed = 0;
    for (int i = 0; i < 100; i++) {
        rc = pthread_mutex_lock(&s->mutex);
        if (rc == 0) {
            locked++;
            CHECK(pthread_mutex_unlock(&s->mutex));
        } else {
            failed = rc;
        }
    }
    printf("%s-loop %d\n", name, failed);
    printf("%s-locked %d\n", name, locked);
}

int main(void)
{
    static struct subject pi, pp;
    alarm(20);
    fprintf(stderr, "pi %p\npp %p\n", (void *)&pi.mutex, (void *)&pp.mutex);
    exercise("pi", &pi, PTHREAD_PRIO_INHERIT);
    exercise("pp", &pp, PTHREAD_PRIO_PROTECT);
    return 0;
}
