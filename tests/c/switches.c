/* LOCKSUIT_SWITCHES=1: the blocking the hooks cannot see. Three threads
 * spin on two cores (each is preempted: it measures the time it was off
 * its CPU as its wall time minus its CPU time) and one sleeps through a
 * raw system call that bypasses libc (as Go's runtime does). Each prints
 * what it measured (`name_ns N`).
 *
 * Arguments: none, or "deny": as root, forbid perf_event_open with a
 * seccomp filter installed without no-new-privs and exec this program
 * again ("denied"), as a container runtime starts a program under its
 * profile, so the shim must say so once and carry on (prints "deny: not
 * root" and exits 0 where the filter cannot be installed so); or "fault DIR": a thread writes a file in DIR, has the kernel
 * drop it from the page cache, and reads it back through a mapping (major
 * page faults), printing how many pages it touched; or "naps N": a thread
 * makes N short raw nanosleeps, more switches than its ring holds. */
#include "common.h"
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#define SPINNERS 3

static long long off_cpu_ns[SPINNERS], raw_sleep_ns;

static long long cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *spinner(void *arg)
{
    long i = (long)arg;
    long long wall0 = now_ns(), cpu0 = cpu_ns();
    /* 300 ms of wall time, on a machine with fewer cores than spinners. */
    volatile unsigned long x = 0;
    while (now_ns() - wall0 < 300000000LL)
        for (int k = 0; k < 1000; k++)
            x += k;
    off_cpu_ns[i] = (now_ns() - wall0) - (cpu_ns() - cpu0);
    return NULL;
}

/* nanosleep through the syscall instruction itself: no libc, no hook. */
static void raw_nanosleep(long ms)
{
    struct timespec ts = { 0, ms * 1000000L };
#if defined(__x86_64__)
    long rc;
    __asm__ volatile("syscall" : "=a"(rc) : "a"(SYS_nanosleep), "D"(&ts), "S"(0) : "rcx", "r11", "memory");
    (void)rc;
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = SYS_nanosleep;
    register long x0 __asm__("x0") = (long)&ts;
    register long x1 __asm__("x1") = 0;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1) : "memory");
#endif
}

static void *raw_sleeper(void *arg)
{
    (void)arg;
    long long t0 = now_ns();
    raw_nanosleep(40); /* marker: raw sleep */
    raw_sleep_ns = now_ns() - t0;
    return NULL;
}

/* perf_event_open fails with EACCES from now on, in every thread. */
static void deny_perf_events(const char *self)
{
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_perf_event_open, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EACCES),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = { sizeof filter / sizeof filter[0], filter };
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
        if (errno == EACCES) {
            printf("deny: not root\n");
            exit(0);
        }
        perror("seccomp");
        exit(3);
    }
    execl(self, self, "denied", (char *)NULL);
    perror("exec");
    exit(3);
}

#define FAULT_PAGES 2048

/* Reads every page of the mapping: each is a major fault. */
__attribute__((noinline)) static unsigned long touch_pages(const unsigned char *map, long pages)
{
    unsigned long sum = 0;
    for (long i = 0; i < pages; i++)
        sum += map[i * 4096]; /* marker: page fault */
    return sum;
}

static const char *fault_dir;

static void *faulter(void *arg)
{
    (void)arg;
    char path[4096];
    snprintf(path, sizeof path, "%s/faulted.%d", fault_dir, (int)getpid());
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    static unsigned char page[4096];
    for (long i = 0; i < FAULT_PAGES; i++) {
        page[0] = (unsigned char)i;
        if (write(fd, page, sizeof page) != (ssize_t)sizeof page)
            exit(3);
    }
    fsync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    unsigned char *map = mmap(NULL, FAULT_PAGES * 4096L, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
        exit(3);
    printf("fault_sum %lu\n", touch_pages(map, FAULT_PAGES));
    munmap(map, FAULT_PAGES * 4096L);
    close(fd);
    unlink(path);
    return NULL;
}

static void *napper(void *arg)
{
    long naps = (long)arg;
    struct timespec ts = { 0, 10000 };
    for (long i = 0; i < naps; i++) {
#if defined(__x86_64__)
        long rc;
        __asm__ volatile("syscall" : "=a"(rc) : "a"(SYS_nanosleep), "D"(&ts), "S"(0) : "rcx", "r11", "memory");
        (void)rc;
#else
        raw_nanosleep(0);
#endif
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 2 && !strcmp(argv[1], "naps")) {
        pthread_t n;
        CHECK(pthread_create(&n, NULL, napper, (void *)atol(argv[2])));
        CHECK(pthread_join(n, NULL));
        return 0;
    }
    if (argc > 2 && !strcmp(argv[1], "fault")) {
        fault_dir = argv[2];
        pthread_t f;
        CHECK(pthread_create(&f, NULL, faulter, NULL));
        CHECK(pthread_setname_np(f, "faulter"));
        CHECK(pthread_join(f, NULL));
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "deny"))
        deny_perf_events("/proc/self/exe");
    pthread_t t[SPINNERS], raw;
    char name[16];
    for (long i = 0; i < SPINNERS; i++) {
        CHECK(pthread_create(&t[i], NULL, spinner, (void *)i));
        snprintf(name, sizeof name, "spinner%ld", i);
        CHECK(pthread_setname_np(t[i], name));
    }
    CHECK(pthread_create(&raw, NULL, raw_sleeper, NULL));
    CHECK(pthread_setname_np(raw, "raw"));
    for (int i = 0; i < SPINNERS; i++)
        CHECK(pthread_join(t[i], NULL));
    CHECK(pthread_join(raw, NULL));
    for (int i = 0; i < SPINNERS; i++)
        printf("spinner%d_off_ns %lld\n", i, off_cpu_ns[i]);
    printf("raw_sleep_ns %lld\n", raw_sleep_ns);
    return 0;
}
