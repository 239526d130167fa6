/* Recording-policy rules with known ground truth.
 *
 * Throughout, a "reader" thread sits in `fgets` on a pipe (stdio's read
 * goes to the kernel without passing a hook), in wait_for_line, until
 * main writes a line at the end: snapshots find it in a system call no
 * hook records. A "raw_reader" thread waits the same way with the system
 * call instruction itself. In phase 1 a "spinner" thread runs in user
 * space (spin_until_stopped) without a call, then prints the CPU time it
 * read itself ("spinner_cpu_ns").
 *
 * Phase 1: main holds `pile_lock` while eight threads pile onto it, one at
 * a time: main starts the next only once the last really blocks (it is
 * in the futex call), so the waiters grow 1, 2, …, 8. Waits that began
 * with k threads waiting (itself included): one each for k = 1..8.
 * Phase 2: `other_lock`, held by main, gets one waiter (at
 * other_waiter), which began with 1 waiting.
 *
 * Prints "holder TID", "waiter_K TID" (K = 1..8, in arrival order),
 * "other TID", "reader TID", "raw_reader TID" and "spinner TID". */
#include "common.h"
#include <sys/resource.h>

static pthread_mutex_t pile_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t other_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int tids[8];
static volatile int other_tid;
static volatile int reader_tid;
static volatile int raw_reader_tid;
static volatile int spinner_tid;
static volatile int stop_spinning;

static void wait_for_line(FILE *in)
{
    char line[16];
    if (!fgets(line, sizeof line, in))
        abort();
}

static void *reader(void *arg)
{
    reader_tid = gettid_now();
    wait_for_line(arg);
    return NULL;
}

/* The same wait made with the system call instruction itself, from a
 * function built with a frame pointer (the tests build at -O0): the
 * kernel gives no frame pointer, so the walk has to find its record. */
static void raw_wait_for_byte(int fd)
{
    char byte;
#ifdef __x86_64__
    long rc;
    __asm__ volatile("syscall"
                     : "=a"(rc)
                     : "0"((long)SYS_read), "D"((long)fd), "S"(&byte), "d"(1L)
                     : "rcx", "r11", "memory");
#else
    long rc = syscall(SYS_read, fd, &byte, 1);
#endif
    if (rc != 1)
        abort();
}

/* Runs in user space, never calling out, until main says stop. */
static void spin_until_stopped(void)
{
    volatile unsigned long turns = 0;
    while (!stop_spinning)
        turns++;
}

static long long spinner_cpu_ns;

static void *spinner(void *arg)
{
    (void)arg;
    spinner_tid = gettid_now();
    spin_until_stopped();
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    spinner_cpu_ns = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL +
                     (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
    return NULL;
}

static void *raw_reader(void *arg)
{
    raw_reader_tid = gettid_now();
    raw_wait_for_byte((int)(long)arg);
    return NULL;
}

static void *pile_on(void *arg)
{
    int i = (int)(long)arg;
    tids[i] = gettid_now();
    CHECK(pthread_mutex_lock(&pile_lock));
    CHECK(pthread_mutex_unlock(&pile_lock));
    return NULL;
}

static void *other_waiter(void *arg)
{
    (void)arg;
    other_tid = gettid_now();
    /* Begin waiting while main sleeps between its polls (it is then off
     * the processors, so on an unloaded machine one is idle). */
    sleep_ms(5);
    CHECK(pthread_mutex_lock(&other_lock));
    CHECK(pthread_mutex_unlock(&other_lock));
    return NULL;
}

/* Starts `fn` and returns once its thread blocks in the futex call. */
static pthread_t start_and_wait_blocked(void *(*fn)(void *), long arg, volatile int *tid)
{
    pthread_t t;
    CHECK(pthread_create(&t, NULL, fn, (void *)arg));
    while (*tid == 0 || !in_futex_wait(*tid))
        sleep_ms(1);
    return t;
}

static void hold_and_pile(void)
{
    pthread_t t[8], spin;
    CHECK(pthread_create(&spin, NULL, spinner, NULL));
    while (spinner_tid == 0)
        sleep_ms(1);
    CHECK(pthread_mutex_lock(&pile_lock));
    for (int i = 0; i < 8; i++)
        t[i] = start_and_wait_blocked(pile_on, i, &tids[i]);
    CHECK(pthread_mutex_unlock(&pile_lock));
    stop_spinning = 1;
    CHECK(pthread_join(spin, NULL));
    for (int i = 0; i < 8; i++)
        CHECK(pthread_join(t[i], NULL));
}

static void hold_other(void)
{
    CHECK(pthread_mutex_lock(&other_lock));
    pthread_t t = start_and_wait_blocked(other_waiter, 0, &other_tid);
    CHECK(pthread_mutex_unlock(&other_lock));
    CHECK(pthread_join(t, NULL));
}

int main(void)
{
    int fds[2], raw_fds[2];
    pthread_t r, raw;
    CHECK(pipe(fds));
    CHECK(pipe(raw_fds));
    CHECK(pthread_create(&raw, NULL, raw_reader, (void *)(long)raw_fds[0]));
    FILE *in = fdopen(fds[0], "r");
    if (!in)
        abort();
    CHECK(pthread_create(&r, NULL, reader, in));
    while (reader_tid == 0 || !in_syscall(reader_tid, SYS_read))
        sleep_ms(1);
    while (raw_reader_tid == 0 || !in_syscall(raw_reader_tid, SYS_read))
        sleep_ms(1);
    printf("holder %d\n", gettid_now());
    hold_and_pile();
    hold_other();
    if (write(fds[1], "done\n", 5) != 5)
        abort();
    CHECK(pthread_join(r, NULL));
    if (write(raw_fds[1], "x", 1) != 1)
        abort();
    CHECK(pthread_join(raw, NULL));
    close(raw_fds[0]);
    close(raw_fds[1]);
    fclose(in);
    close(fds[1]);
    for (int i = 0; i < 8; i++)
        printf("waiter_%d %d\n", i + 1, tids[i]);
    printf("other %d\n", other_tid);
    printf("reader %d\n", reader_tid);
    printf("raw_reader %d\n", raw_reader_tid);
    printf("spinner %d\n", spinner_tid);
    printf("spinner_cpu_ns %lld\n", spinner_cpu_ns);
    return 0;
}
