/* Fast-path compensation: thread A holds L while it makes N uncontended
 * lock/unlock pairs on M (every one through the shim's fast path), and B
 * waits for L meanwhile. A measures its own hold of L and the CPU time of
 * its loop, and prints them on stdout: the loop's CPU time with the shim
 * minus without it is the shim's own cost inside the hold, whatever else
 * the machine is doing.
 * Prints L's address on stderr. Usage: fast_path_compensation N */
#include "common.h"

#include <stdatomic.h>
#include <stdlib.h>

static pthread_mutex_t L = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t M = PTHREAD_MUTEX_INITIALIZER;
static atomic_int holding;
static long pairs;
static long long hold_ns, loop_cpu_ns;

/* CPU time of this thread: unlike wall time, it does not grow when the
 * thread is preempted on a busy machine. */
static long long thread_cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void *thread_a(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&L));
    long long start = now_ns();
    atomic_store(&holding, 1);
    sleep_ms(2); /* B is waiting by now */
    long long cpu = thread_cpu_ns();
    for (long i = 0; i < pairs; i++) {
        CHECK(pthread_mutex_lock(&M));
        CHECK(pthread_mutex_unlock(&M));
    }
    loop_cpu_ns = thread_cpu_ns() - cpu;
    hold_ns = now_ns() - start;
    CHECK(pthread_mutex_unlock(&L));
    return NULL;
}

static void *thread_b(void *arg)
{
    (void)arg;
    while (!atomic_load(&holding))
        ;
    CHECK(pthread_mutex_lock(&L));
    CHECK(pthread_mutex_unlock(&L));
    return NULL;
}

int main(int argc, char **argv)
{
    pairs = argc > 1 ? atol(argv[1]) : 500000;
    pthread_t a, b;
    CHECK(pthread_create(&a, NULL, thread_a, NULL));
    CHECK(pthread_create(&b, NULL, thread_b, NULL));
    CHECK(pthread_join(a, NULL));
    CHECK(pthread_join(b, NULL));
    printf("hold_ns %lld\nloop_cpu_ns %lld\n", hold_ns, loop_cpu_ns);
    fprintf(stderr, "lock %p\n", (void *)&L);
    return 0;
}
