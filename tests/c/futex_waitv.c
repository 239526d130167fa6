/* futex_waitv(2) through syscall(): a waiter waits on one word until the
 * main thread, which has seen it blocked in the call, holds on for HOLD_MS
 * more and wakes it (FUTEX_WAKE through syscall()); then a waiter waits on
 * two words at once until the main thread wakes the second.
 *
 * Prints "one_waiter_tid", "main_tid", "one_held_ns" (from seeing the
 * waiter blocked to the wake), "one_waited_ns" (the waiter's own measure of
 * its call), and for the two-word wait "two_waiter_tid", "two_held_ns",
 * "two_waited_ns" and "two_index" (which word ended the wait). */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif
#define HOLD_MS 60

static uint32_t one_word = 1;
static uint32_t two_words[2] = {1, 1};
static _Atomic int waiter_tid;

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Returns once thread `tid` is in system call `nr`. */
static void until_in_call(int tid, long nr) {
    char path[64], text[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
    for (;;) {
        FILE *f = fopen(path, "r");
        if (f) {
            size_t n = fread(text, 1, sizeof text - 1, f);
            fclose(f);
            text[n] = 0;
            if (strtol(text, NULL, 10) == nr)
                return;
        }
        usleep(200);
    }
}

static long waitv(uint32_t *words, int n) {
    struct futex_waitv w[2];
    memset(w, 0, sizeof w);
    for (int i = 0; i < n; i++) {
        w[i].val = 1;
        w[i].uaddr = (uintptr_t)&words[i];
        w[i].flags = FUTEX_32 | FUTEX_PRIVATE_FLAG;
    }
    long rc;
    do {
        rc = syscall(SYS_futex_waitv, w, n, 0, NULL, CLOCK_MONOTONIC); /* marker: waitv */
    } while (rc == -1 && __atomic_load_n(&words[n - 1], __ATOMIC_ACQUIRE) == 1);
    return rc;
}

static void *one_waiter(void *arg) {
    (void)arg;
    waiter_tid = (int)syscall(SYS_gettid);
    uint64_t t0 = now_ns();
    waitv(&one_word, 1); /* marker: one wait */
    printf("one_waited_ns %llu\n", (unsigned long long)(now_ns() - t0));
    printf("one_waiter_tid %d\n", (int)syscall(SYS_gettid));
    return NULL;
}

static void *two_waiter(void *arg) {
    (void)arg;
    waiter_tid = (int)syscall(SYS_gettid);
    uint64_t t0 = now_ns();
    long index = waitv(two_words, 2);
    printf("two_waited_ns %llu\n", (unsigned long long)(now_ns() - t0));
    printf("two_index %ld\n", index);
    printf("two_waiter_tid %d\n", (int)syscall(SYS_gettid));
    return NULL;
}

static void wake(uint32_t *word) {
    __atomic_store_n(word, 0, __ATOMIC_RELEASE);
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0); /* marker: wake */
}

int main(void) {
    printf("main_tid %d\n", (int)syscall(SYS_gettid));
    pthread_t t;
    pthread_create(&t, NULL, one_waiter, NULL);
    while (!waiter_tid)
        usleep(100);
    until_in_call(waiter_tid, SYS_futex_waitv);
    uint64_t seen = now_ns();
    usleep(HOLD_MS * 1000);
    uint64_t held = now_ns() - seen;
    wake(&one_word);
    pthread_join(t, NULL);
    printf("one_held_ns %llu\n", (unsigned long long)held);

    waiter_tid = 0;
    pthread_create(&t, NULL, two_waiter, NULL);
    while (!waiter_tid)
        usleep(100);
    until_in_call(waiter_tid, SYS_futex_waitv);
    seen = now_ns();
    usleep(HOLD_MS * 1000);
    held = now_ns() - seen;
    wake(&two_words[1]);
    pthread_join(t, NULL);
    printf("two_held_ns %llu\n", (unsigned long long)held);
    return 0;
}
