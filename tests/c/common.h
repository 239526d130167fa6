/* Shared helpers for the locksuit test programs.
 *
 * CHECK() is a macro on purpose: a lock call wrapped in it stays on the
 * caller's line, so the analyzer attributes the engagement to that line and
 * not to a helper function. */
#ifndef LOCKSUIT_TEST_COMMON_H
#define LOCKSUIT_TEST_COMMON_H

#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static inline void die_rc(const char *what, int rc, int line)
{
    fprintf(stderr, "line %d: %s returned %d (%s)\n", line, what, rc, strerror(rc));
    exit(3);
}

#define CHECK(call)                                    \
    do {                                               \
        int check_rc_ = (call);                        \
        if (check_rc_ != 0)                            \
            die_rc(#call, check_rc_, __LINE__);        \
    } while (0)

/* Monotonic clock in nanoseconds. */
static inline long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Sleep for ms milliseconds (no mutex involved). */
static inline void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* n writes and reads of a private pipe, none of which blocks: after 64
 * such calls in a row the shim times a thread's calls without a clock
 * (shim/src/recorder/time/call_timer/). Exits 3 if the pipe fails. */
static inline void calm_pipe_calls(int n)
{
    int fds[2];
    char byte = 'c';
    if (pipe(fds) != 0)
        exit(3);
    for (int i = 0; i < n; i++)
        if (write(fds[1], &byte, 1) != 1 || read(fds[0], &byte, 1) != 1)
            exit(3);
    close(fds[0]);
    close(fds[1]);
}

/* True while thread `tid` of this process is in system call `nr`. */
static inline int in_syscall(int tid, long nr)
{
    char path[64], buf[128];
    snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    if (!ok)
        return 0;
    return strtol(buf, NULL, 10) == nr;
}

/* True once thread `tid` of this process is blocked in the futex system
 * call (a lock, semaphore or condition wait that really blocked). */
static inline int in_futex_wait(int tid)
{
    return in_syscall(tid, SYS_futex);
}

/* Keeps the CPU busy for ms milliseconds of wall time. */
static inline void spin_ms(long ms)
{
    long long t0 = now_ns();
    volatile unsigned long x = 0;
    while (now_ns() - t0 < ms * 1000000LL)
        for (int k = 0; k < 1000; k++)
            x += k;
}

/* Runs `handler` on SIGTERM instead of dying of it. */
static inline void catch_sigterm(void (*handler)(int))
{
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = handler;
    sigemptyset(&action.sa_mask);
    CHECK(sigaction(SIGTERM, &action, NULL));
}

/* This thread's kernel id. */
static inline int gettid_now(void)
{
    return (int)syscall(SYS_gettid);
}

#endif
