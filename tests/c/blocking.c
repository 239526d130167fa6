/* Who blocks whom, with known timing:
 *
 * 1. Thread A locks L and holds it 300 ms; thread B asks for L 100 ms after
 *    A took it, so B waits about 200 ms, blocked by A.
 * 2. Thread A2 holds L until 150 ms after thread B2 asks for it with
 *    pthread_mutex_timedlock and a 50 ms deadline: ETIMEDOUT after about 50 ms.
 *
 * Prints the lock's address, the four threads' tids, A's hold and B's and
 * B2's waits as the threads themselves measured them (on a loaded machine
 * a sleep can overshoot, so the forced times are not always what happened),
 * and the timedlock's result. */
#include "common.h"

#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_mutex_t L = PTHREAD_MUTEX_INITIALIZER;
static atomic_int holding;
static atomic_int b2_asking;
static atomic_int tids[4];
/* Each thread's own measure of what the shim must report. */
static long long a_hold_ns, b_wait_ns, b2_wait_ns;

static void *thread_a(void *arg)
{
    (void)arg;
    atomic_store(&tids[0], (int)syscall(SYS_gettid));
    CHECK(pthread_mutex_lock(&L)); /* @a-lock */
    long long got = now_ns();
    atomic_store(&holding, 1);
    sleep_ms(300);
    a_hold_ns = now_ns() - got;
    CHECK(pthread_mutex_unlock(&L));
    return NULL;
}

static void *thread_b(void *arg)
{
    (void)arg;
    atomic_store(&tids[1], (int)syscall(SYS_gettid));
    while (!atomic_load(&holding))
        ;
    sleep_ms(100);
    long long asked = now_ns();
    CHECK(pthread_mutex_lock(&L)); /* @b-lock */
    b_wait_ns = now_ns() - asked;
    CHECK(pthread_mutex_unlock(&L));
    return NULL;
}

static void *thread_a2(void *arg)
{
    (void)arg;
    atomic_store(&tids[2], (int)syscall(SYS_gettid));
    CHECK(pthread_mutex_lock(&L));
    atomic_store(&holding, 2);
    /* Hold it 150 ms from when B2 asks, however late B2 gets to run. */
    while (!atomic_load(&b2_asking))
        sleep_ms(1);
    sleep_ms(150);
    CHECK(pthread_mutex_unlock(&L));
    return NULL;
}

static int timed_rc;

static void *thread_b2(void *arg)
{
    (void)arg;
    atomic_store(&tids[3], (int)syscall(SYS_gettid));
    while (atomic_load(&holding) != 2)
        ;
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_nsec += 50 * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    long long asked = now_ns();
    atomic_store(&b2_asking, 1);
    timed_rc = pthread_mutex_timedlock(&L, &deadline); /* @b2-timedlock */
    b2_wait_ns = now_ns() - asked;
    if (timed_rc == 0)
        CHECK(pthread_mutex_unlock(&L));
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    CHECK(pthread_create(&a, NULL, thread_a, NULL));
    CHECK(pthread_create(&b, NULL, thread_b, NULL));
    CHECK(pthread_join(a, NULL));
    CHECK(pthread_join(b, NULL));
    CHECK(pthread_create(&a, NULL, thread_a2, NULL));
    CHECK(pthread_create(&b, NULL, thread_b2, NULL));
    CHECK(pthread_join(a, NULL));
    CHECK(pthread_join(b, NULL));
    printf("timedlock %s\n", timed_rc == ETIMEDOUT ? "ETIMEDOUT" : "unexpected");
    fprintf(stderr, "lock %p\n", (void *)&L);
    fprintf(stderr, "a-hold-ns %lld\nb-wait-ns %lld\nb2-wait-ns %lld\n", a_hold_ns, b_wait_ns,
            b2_wait_ns);
    fprintf(stderr, "tid-a %d\ntid-b %d\ntid-a2 %d\ntid-b2 %d\n", tids[0], tids[1], tids[2], tids[3]);
    return timed_rc == ETIMEDOUT ? 0 : 1;
}
