/* Per-thread run statistics against what each thread reads itself with
 * getrusage(RUSAGE_THREAD) just before it ends: CPU time and voluntary and
 * involuntary context switches. Two workers each spin for 60 ms of wall
 * time and sleep three times; main spins 30 ms and joins them. Each
 * prints `NAME_cpu_ns`, `NAME_voluntary`, `NAME_involuntary`.
 *
 * Arguments: none. */
#include "common.h"
#include <sys/resource.h>

static void report(const char *name)
{
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    long long cpu = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL +
                    (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
    printf("%s_cpu_ns %lld\n%s_voluntary %ld\n%s_involuntary %ld\n", name, cpu, name, ru.ru_nvcsw,
           name, ru.ru_nivcsw);
}

static void *worker(void *arg)
{
    spin_ms(60);
    for (int i = 0; i < 3; i++)
        sleep_ms(10);
    report((const char *)arg);
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    CHECK(pthread_create(&a, NULL, worker, "worker0"));
    CHECK(pthread_create(&b, NULL, worker, "worker1"));
    CHECK(pthread_setname_np(a, "worker0"));
    CHECK(pthread_setname_np(b, "worker1"));
    spin_ms(30);
    CHECK(pthread_join(a, NULL));
    CHECK(pthread_join(b, NULL));
    fflush(stdout);
    report("main");
    return 0;
}
