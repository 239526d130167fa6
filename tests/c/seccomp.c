/* Programs that confine themselves, for issue 33: each must behave the
 * same with and without the shim.
 *
 *   seccomp strict       main enters SECCOMP_MODE_STRICT (read, write,
 *                        exit, sigreturn only; no TSC), then takes a mutex
 *                        and writes a line, 200 times, and leaves with the
 *                        exit system call, status 7.
 *   seccomp filter       3 workers take one mutex in turns and write; after
 *                        they started, main installs an allowlist for what
 *                        the program itself uses on every thread (TSYNC;
 *                        anything else: SIGSYS), starts 2 more workers, lets
 *                        all 5 run 300 rounds, joins them and exits 3.
 *                        Prints "rounds N" (all threads) and "locked N".
 *   seccomp inherited    main sets no-new-privs, installs a filter that
 *                        kills the process on the calls a program of its
 *                        own does not make (readlinkat, pwrite64, pwritev,
 *                        getpid, gettid, getrusage, perf_event_open,
 *                        process_vm_readv, fcntl), then execs itself as
 *                        "seccomp after-exec", which takes a mutex from two
 *                        threads, writes, and exits 5.
 *   seccomp privileged   as root, without no-new-privs, a filter that
 *                        refuses perf_event_open and process_vm_readv with
 *                        EPERM (as a container runtime's default profile),
 *                        then the same exec: the new image is recorded.
 *   seccomp tsc          main turns its TSC off (PR_SET_TSC: rdtsc faults),
 *                        then takes a mutex contended with a worker and
 *                        sleeps in between, 100 rounds; exits 0.
 *   seccomp rseq         main unregisters glibc's rseq area and registers
 *                        it again with a signature of its own (through
 *                        syscall(), as librseq does), then makes blocking
 *                        calls that sleep; exits 0. A descriptor with
 *                        glibc's signature left in the area would get it
 *                        killed (SIGSEGV).
 *
 * Output: "mode <mode>", then what the mode prints. */
#include "common.h"
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>

#ifndef PR_SET_TSC
#define PR_SET_TSC 26
#define PR_TSC_SIGSEGV 2
#endif
#ifndef SECCOMP_FILTER_FLAG_TSYNC
#define SECCOMP_FILTER_FLAG_TSYNC 1
#endif

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long locked;

/* write(2) of a whole string, raw enough for strict mode. */
static void say(const char *s)
{
    size_t n = strlen(s);
    if (write(1, s, n) != (ssize_t)n)
        syscall(SYS_exit, 9);
}

#define ALLOW(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)
#define DENY(nr, action) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, (action))
#define LOAD_NR BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))
#define CHECK_ARCH                                                                    \
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),          \
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),                 \
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS)

/* ------------------------------------------------------------- strict */

static int strict(void)
{
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT, 0, 0, 0) != 0) {
        perror("prctl");
        return 2;
    }
    for (int i = 0; i < 200; i++) {
        pthread_mutex_lock(&m);
        locked++;
        pthread_mutex_unlock(&m);
        say("a line written under strict mode\n");
    }
    syscall(SYS_exit, 7);
    return 0; /* not reached */
}

/* ------------------------------------------------------------- filter */

static _Atomic int go;
static long rounds[5];

static void *worker(void *arg)
{
    long *mine = arg;
    while (!go)
        sleep_ms(1);
    while (*mine < 300) {
        pthread_mutex_lock(&m);
        locked++;
        pthread_mutex_unlock(&m);
        (*mine)++;
        if (*mine % 50 == 0)
            say(".");
        if (*mine % 10 == 0)
            sleep_ms(1);
    }
    return NULL;
}

static int install(struct sock_filter *f, unsigned short len, unsigned flags)
{
    struct sock_fprog prog = { .len = len, .filter = f };
    return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
}

static int filter(void)
{
    pthread_t t[5];
    for (int i = 0; i < 3; i++)
        CHECK(pthread_create(&t[i], NULL, worker, &rounds[i]));
    go = 1;
    sleep_ms(20);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return 2;
    /* What this program and glibc make from here on, and no more. */
    struct sock_filter f[] = {
        CHECK_ARCH,
        LOAD_NR,
        ALLOW(SYS_read), ALLOW(SYS_write), ALLOW(SYS_futex), ALLOW(SYS_mmap),
        ALLOW(SYS_munmap), ALLOW(SYS_mprotect), ALLOW(SYS_brk), ALLOW(SYS_madvise),
        ALLOW(SYS_clock_gettime), ALLOW(SYS_clock_nanosleep), ALLOW(SYS_nanosleep),
        ALLOW(SYS_clone), ALLOW(SYS_clone3), ALLOW(SYS_set_robust_list), ALLOW(SYS_rseq),
        ALLOW(SYS_rt_sigprocmask), ALLOW(SYS_rt_sigreturn), ALLOW(SYS_sched_yield),
        ALLOW(SYS_exit), ALLOW(SYS_exit_group),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
    };
    if (install(f, sizeof f / sizeof f[0], SECCOMP_FILTER_FLAG_TSYNC) != 0) {
        perror("seccomp");
        return 2;
    }
    for (int i = 3; i < 5; i++)
        CHECK(pthread_create(&t[i], NULL, worker, &rounds[i]));
    for (int i = 0; i < 5; i++)
        CHECK(pthread_join(t[i], NULL));
    char line[64];
    long all = 0;
    for (int i = 0; i < 5; i++)
        all += rounds[i];
    snprintf(line, sizeof line, "\nrounds %ld\nlocked %ld\n", all, locked);
    say(line);
    exit(3);
}

/* ---------------------------------------------------------- inherited */

static void *after_exec_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 100; i++) {
        pthread_mutex_lock(&m);
        locked++;
        pthread_mutex_unlock(&m);
    }
    return NULL;
}

static int after_exec(void)
{
    pthread_t t;
    CHECK(pthread_create(&t, NULL, after_exec_worker, NULL));
    after_exec_worker(NULL);
    CHECK(pthread_join(t, NULL));
    char line[64];
    snprintf(line, sizeof line, "after exec, locked %ld\n", locked);
    say(line);
    exit(5);
}

static int inherited(const char *self, int privileged)
{
    if (!privileged && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return 2;
    const unsigned kill = SECCOMP_RET_KILL_PROCESS, eperm = SECCOMP_RET_ERRNO | EPERM;
    struct sock_filter sandbox[] = {
        CHECK_ARCH,
        LOAD_NR,
        DENY(SYS_readlinkat, kill), DENY(SYS_readlink, kill), DENY(SYS_pwrite64, kill),
        DENY(SYS_pwritev, kill), DENY(SYS_getpid, kill), DENY(SYS_gettid, kill),
        DENY(SYS_getrusage, kill), DENY(SYS_perf_event_open, kill),
        DENY(SYS_process_vm_readv, kill), DENY(SYS_fcntl, kill),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    /* As a container runtime's default profile: a few calls refused. */
    struct sock_filter runtime[] = {
        CHECK_ARCH,
        LOAD_NR,
        DENY(SYS_perf_event_open, eperm), DENY(SYS_process_vm_readv, eperm),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    int rc = privileged ? install(runtime, sizeof runtime / sizeof runtime[0], 0)
                        : install(sandbox, sizeof sandbox / sizeof sandbox[0], 0);
    if (rc != 0) {
        perror("seccomp");
        return 2;
    }
    fflush(stdout);
    execl(self, self, "after-exec", (char *)NULL);
    perror("execl");
    return 2;
}

/* ---------------------------------------------------------------- tsc */

static void *tsc_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 100; i++) {
        pthread_mutex_lock(&m);
        locked++;
        sleep_ms(1);
        pthread_mutex_unlock(&m);
    }
    return NULL;
}

static int tsc(void)
{
    if (prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0) != 0) {
        printf("no PR_SET_TSC here\n");
        return 0;
    }
    pthread_t t;
    CHECK(pthread_create(&t, NULL, tsc_worker, NULL));
    for (int i = 0; i < 100; i++) {
        pthread_mutex_lock(&m);
        locked++;
        pthread_mutex_unlock(&m);
        sleep_ms(1);
    }
    CHECK(pthread_join(t, NULL));
    printf("locked %ld\n", locked);
    return 0;
}

/* --------------------------------------------------------------- rseq */

extern const ptrdiff_t __rseq_offset __attribute__((weak));
extern const unsigned int __rseq_size __attribute__((weak));
#define GLIBC_RSEQ_SIG 0x53053053
#define OWN_RSEQ_SIG 0x0badcafe

static int rseq(void)
{
    if (&__rseq_size == NULL || __rseq_size == 0) {
        printf("no rseq from glibc here\n");
        return 0;
    }
    /* Calm calls first, so that a shim would already trust the area. */
    calm_pipe_calls(200);
    for (int i = 0; i < 20; i++)
        sleep_ms(1);
    void *area = (char *)__builtin_thread_pointer() + __rseq_offset;
    unsigned len = __rseq_size < 32 ? 32 : __rseq_size;
    if (syscall(SYS_rseq, area, len, 1 /* RSEQ_FLAG_UNREGISTER */, GLIBC_RSEQ_SIG) != 0) {
        printf("cannot unregister: %s\n", strerror(errno));
        return 0;
    }
    if (syscall(SYS_rseq, area, len, 0, OWN_RSEQ_SIG) != 0) {
        printf("cannot register: %s\n", strerror(errno));
        return 0;
    }
    calm_pipe_calls(200);
    for (int i = 0; i < 50; i++) {
        pthread_mutex_lock(&m);
        locked++;
        pthread_mutex_unlock(&m);
        sleep_ms(1);
    }
    printf("registered its own, locked %ld\n", locked);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "after-exec"))
        return after_exec();
    printf("mode %s\n", mode);
    fflush(stdout);
    if (!strcmp(mode, "strict"))
        return strict();
    if (!strcmp(mode, "filter"))
        return filter();
    if (!strcmp(mode, "inherited"))
        return inherited(argv[0], 0);
    if (!strcmp(mode, "privileged"))
        return inherited(argv[0], 1);
    if (!strcmp(mode, "tsc"))
        return tsc();
    if (!strcmp(mode, "rseq"))
        return rseq();
    fprintf(stderr, "usage: seccomp strict|filter|inherited|privileged|tsc|rseq\n");
    return 2;
}
