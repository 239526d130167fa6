/* Handoffs between threads that are not locks, for the merged stream:
 * main creates a poster and a waiter; the waiter waits on `ready` and the
 * poster posts it 3 ms after the waiter's previous turn, until the waiter
 * has measured five waits that surely blocked (over 1 ms); then both meet
 * three times at a barrier for two. Last, both take `rw` for reading and
 * hold it 2 and 4 ms after main has blocked asking to take it for writing
 * (a barrier for three starts the holds; each reader then waits until
 * main is seen in its futex wait, so main waits however busy the machine
 * is); they exit, and main joins them.
 *
 * Prints "blocked K" (the waits it measured over 1 ms). */
#include "common.h"
#include <semaphore.h>

static sem_t ready, again;
static pthread_barrier_t meet, three;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static volatile int main_tid, writing;

/* Holds `rw` for reading for `ms` milliseconds, held from before main asks
 * to write. */
static void read_for(long ms)
{
    CHECK(pthread_rwlock_rdlock(&rw));
    int rc = pthread_barrier_wait(&three);
    if (rc != 0 && rc != PTHREAD_BARRIER_SERIAL_THREAD)
        die_rc("pthread_barrier_wait", rc, __LINE__);
    while (!(__atomic_load_n(&writing, __ATOMIC_ACQUIRE) && in_futex_wait(main_tid)))
        sleep_ms(1);
    sleep_ms(ms);
    CHECK(pthread_rwlock_unlock(&rw));
}

static void meet_three_times(void)
{
    for (int i = 0; i < 3; i++) {
        int rc = pthread_barrier_wait(&meet);
        if (rc != 0 && rc != PTHREAD_BARRIER_SERIAL_THREAD)
            die_rc("pthread_barrier_wait", rc, __LINE__);
    }
}
static volatile int done;
static int blocked;

static void *poster(void *arg)
{
    (void)arg;
    while (!done) {
        sleep_ms(3);
        CHECK(sem_post(&ready));
        CHECK(sem_wait(&again));
    }
    meet_three_times();
    read_for(2);
    return NULL;
}

static void *waiter(void *arg)
{
    (void)arg;
    for (int round = 0; round < 200 && blocked < 5; round++) {
        long long t0 = now_ns();
        CHECK(sem_wait(&ready));
        if (now_ns() - t0 > 1000000LL)
            blocked++;
        if (blocked >= 5 || round == 199)
            done = 1;
        CHECK(sem_post(&again));
    }
    meet_three_times();
    read_for(4);
    return NULL;
}

int main(void)
{
    main_tid = gettid_now();
    CHECK(sem_init(&ready, 0, 0));
    CHECK(sem_init(&again, 0, 0));
    CHECK(pthread_barrier_init(&meet, NULL, 2));
    CHECK(pthread_barrier_init(&three, NULL, 3));
    pthread_t p, w;
    CHECK(pthread_create(&p, NULL, poster, NULL));
    CHECK(pthread_create(&w, NULL, waiter, NULL));
    int rc = pthread_barrier_wait(&three);
    if (rc != 0 && rc != PTHREAD_BARRIER_SERIAL_THREAD)
        die_rc("pthread_barrier_wait", rc, __LINE__);
    __atomic_store_n(&writing, 1, __ATOMIC_RELEASE);
    CHECK(pthread_rwlock_wrlock(&rw));
    CHECK(pthread_rwlock_unlock(&rw));
    CHECK(pthread_join(w, NULL));
    CHECK(pthread_join(p, NULL));
    printf("blocked %d\n", blocked);
    return 0;
}
