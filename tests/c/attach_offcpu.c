/* Why threads stop, for `locksuit attach`: once the file named by argv[1]
 * exists, a sleeper sleeps 5 times 20 ms (nanosleep), and two spinners
 * pinned to one CPU spin for 200 ms of wall time each, so that each is
 * preempted for the other about half of it. Each measures itself: the
 * sleeper its time in nanosleep, each spinner its wall time less its CPU
 * time (CLOCK_THREAD_CPUTIME_ID): a spinner never sleeps, so that is its
 * time waiting for a CPU. Prints "sleeper-tid", "sleep-ns",
 * "spinner<i>-tid", "spinner<i>-runnable-ns", "spinner<i>-cpu-ns"; exits
 * 0. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static uint64_t clock_ns(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static uint64_t sleep_ns;
static long sleeper_tid;

static void *sleeper(void *arg) {
    (void)arg;
    sleeper_tid = syscall(SYS_gettid);
    for (int i = 0; i < 5; i++) {
        struct timespec d = {0, 20 * 1000 * 1000};
        uint64_t t0 = clock_ns(CLOCK_MONOTONIC);
        nanosleep(&d, NULL);
        sleep_ns += clock_ns(CLOCK_MONOTONIC) - t0;
    }
    return NULL;
}

static uint64_t runnable_ns[2], cpu_ns[2];
static long spinner_tid[2];

static void *spinner(void *arg) {
    long i = (long)arg;
    spinner_tid[i] = syscall(SYS_gettid);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    sched_setaffinity(0, sizeof one, &one);
    uint64_t w0 = clock_ns(CLOCK_MONOTONIC), c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    while (clock_ns(CLOCK_MONOTONIC) - w0 < 200 * 1000 * 1000) {
    }
    uint64_t wall = clock_ns(CLOCK_MONOTONIC) - w0, cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
    runnable_ns[i] = wall > cpu ? wall - cpu : 0;
    cpu_ns[i] = cpu;
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    while (access(argv[1], F_OK) != 0)
        usleep(1000);
    pthread_t s, p[2];
    pthread_create(&s, NULL, sleeper, NULL);
    for (long i = 0; i < 2; i++)
        pthread_create(&p[i], NULL, spinner, (void *)i);
    pthread_join(s, NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(p[i], NULL);
    printf("sleeper-tid %ld\nsleep-ns %llu\n", sleeper_tid, (unsigned long long)sleep_ns);
    for (int i = 0; i < 2; i++)
        printf("spinner%d-tid %ld\nspinner%d-runnable-ns %llu\nspinner%d-cpu-ns %llu\n", i,
               spinner_tid[i], i, (unsigned long long)runnable_ns[i], i,
               (unsigned long long)cpu_ns[i]);
    return 0;
}
