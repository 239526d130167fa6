/* Ground truth for processes made without glibc's fork, so with none of
 * its fork handlers (systemd, bubblewrap and Chromium start processes so).
 *
 *   raw_clone clone HOW   The parent runs one wave of threads, then (single
 *                         threaded) starts CHILDREN children, made as HOW
 *                         says. Each child takes child_lock MAIN_USES times
 *                         on its first thread, then runs CHILD_WAVES waves
 *                         of THREADS threads, each taking child_lock USES
 *                         times, and exits 0. Meanwhile the parent runs
 *                         PARENT_WAVES more waves on parent_lock, then
 *                         waits for the children and returns 0. HOW:
 *                           syscall   syscall(SYS_clone, SIGCHLD, 0, ...)
 *                           clone3    syscall(SYS_clone3, ...)
 *                           sys-fork  syscall(SYS_fork) (x86_64)
 *                           glibc     clone(fn, stack, SIGCHLD, arg); the
 *                                     child returns 0 from fn
 *                           glibc-small  the same on a 4 KiB stack, from
 *                                     which the child jumps back (longjmp)
 *                                     into its copy of the parent's, as
 *                                     runc and Chromium do
 *                           _Fork     _Fork()
 *                           asm       the clone system call in inline
 *                                     assembly, out of any hook's sight
 *                                     (x86_64)
 *                           asm-late  the same, and the child's first
 *                                     thread takes no lock (it only makes
 *                                     threads)
 *   raw_clone cut-off     As `clone asm` with one child whose threads are
 *                         made with C11 thrd_create (whose pthread_create
 *                         glibc calls internally, out of any hook's sight),
 *                         the first before the child takes any lock.
 *   raw_clone vfork       The parent takes parent_lock USES times, then
 *                         starts a child with clone(CLONE_VM | CLONE_VFORK)
 *                         (it shares the parent's memory and, as no TLS is
 *                         given, the calling thread's thread-local storage)
 *                         that takes child_lock USES times and returns 0;
 *                         then the same with vfork() and _exit(0).
 *
 * Output: "pid <pid>", "parent_lock <addr>", "child_lock <addr>"; then per
 * child (clone, cut-off) "child <n> pid <pid> threads <t> uses <u>",
 * written by the child itself before it exits, in any order; then
 * "parent-threads <t>", "parent-uses <u>" and "children-ok <n>". */
#include "common.h"

#include <sched.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/wait.h>
#include <threads.h>

#define CHILDREN 2
#define CHILD_WAVES 3
#define PARENT_WAVES 2
#define THREADS 4
#define USES 50
#define MAIN_USES 5

extern pid_t _Fork(void);

static pthread_mutex_t parent_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t child_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int uses;
static int threads_started;
/* Whether threads are made with thrd_create (cut-off's child only). */
static int c11_threads;
static int child_c11_threads;
static int main_uses = MAIN_USES;

static void *worker(void *arg)
{
    pthread_mutex_t *lock = arg;
    for (int i = 0; i < USES; i++) {
        CHECK(pthread_mutex_lock(lock)); /* @worker-lock */
        atomic_fetch_add(&uses, 1);
        CHECK(pthread_mutex_unlock(lock));
    }
    return NULL;
}

static int c11_worker(void *arg)
{
    worker(arg);
    return 0;
}

static void wave(pthread_mutex_t *lock)
{
    pthread_t th[THREADS];
    thrd_t c11[THREADS];
    for (int i = 0; i < THREADS; i++) {
        if (c11_threads) {
            if (thrd_create(&c11[i], c11_worker, lock) != thrd_success)
                exit(3);
        } else {
            CHECK(pthread_create(&th[i], NULL, worker, lock));
        }
    }
    for (int i = 0; i < THREADS; i++) {
        if (c11_threads) {
            if (thrd_join(c11[i], NULL) != thrd_success)
                exit(3);
        } else {
            CHECK(pthread_join(th[i], NULL));
        }
    }
    threads_started += THREADS;
}

static int child_main(int n)
{
    /* Only the counts of this process: the parent's so far were copied. */
    atomic_store(&uses, 0);
    threads_started = 0;
    c11_threads = child_c11_threads;
    if (!c11_threads) {
        for (int i = 0; i < main_uses; i++) {
            CHECK(pthread_mutex_lock(&child_lock)); /* @child-main-lock */
            atomic_fetch_add(&uses, 1);
            CHECK(pthread_mutex_unlock(&child_lock));
        }
    }
    for (int w = 0; w < CHILD_WAVES; w++)
        wave(&child_lock);
    printf("child %d pid %d threads %d uses %d\n", n, (int)getpid(), threads_started,
           atomic_load(&uses));
    fflush(stdout);
    return 0;
}

static int child_fn(void *arg)
{
    return child_main((int)(intptr_t)arg);
}

static jmp_buf child_env;

static int jump_back(void *arg)
{
    longjmp(child_env, 1 + (int)(intptr_t)arg);
}

/* The clone system call as a fork, out of any hook's sight. */
static long asm_clone(void)
{
#if defined(__x86_64__)
    long ret;
    register long tls __asm__("r10") = 0;
    register long child_tid __asm__("r8") = 0;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "0"((long)SYS_clone), "D"((long)SIGCHLD), "S"(0L), "d"(0L), "r"(tls),
                       "r"(child_tid)
                     : "rcx", "r11", "memory");
    if (ret < 0) {
        errno = (int)-ret;
        return -1;
    }
    return ret;
#else
    errno = ENOSYS;
    return -1;
#endif
}

struct clone_args_v0 {
    uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
};

/* A child made as `how` says, running child_main(n); its pid. */
static pid_t start_child(const char *how, int n)
{
    long pid;
    if (strcmp(how, "syscall") == 0) {
        pid = syscall(SYS_clone, (long)SIGCHLD, 0L, 0L, 0L, 0L);
    } else if (strcmp(how, "clone3") == 0) {
        struct clone_args_v0 args = { .exit_signal = SIGCHLD };
        pid = syscall(SYS_clone3, &args, sizeof args);
    } else if (strcmp(how, "sys-fork") == 0) {
#ifdef SYS_fork
        pid = syscall(SYS_fork);
#else
        errno = ENOSYS;
        pid = -1;
#endif
    } else if (strcmp(how, "glibc") == 0) {
        size_t size = 1 << 20;
        char *stack = malloc(size);
        if (!stack)
            exit(3);
        /* The child runs child_fn on this stack and ends when it returns. */
        pid = clone(child_fn, stack + size, SIGCHLD, (void *)(intptr_t)n);
        free(stack);
        return (pid_t)pid;
    } else if (strcmp(how, "glibc-small") == 0) {
        static char small[4096] __attribute__((aligned(16)));
        int jumped = setjmp(child_env);
        if (jumped)
            exit(child_main(jumped - 1));
        pid = clone(jump_back, small + sizeof small, SIGCHLD, (void *)(intptr_t)n);
        return (pid_t)pid;
    } else if (strcmp(how, "_Fork") == 0) {
        pid = _Fork();
    } else if (strcmp(how, "asm") == 0 || strcmp(how, "asm-late") == 0) {
        main_uses = strcmp(how, "asm") == 0 ? MAIN_USES : 0;
        pid = asm_clone();
    } else {
        fprintf(stderr, "unknown way to clone: %s\n", how);
        exit(2);
    }
    if (pid == 0)
        exit(child_main(n));
    return (pid_t)pid;
}

static int wait_children(const pid_t *pids, int n)
{
    int ok = 0;
    for (int i = 0; i < n; i++) {
        int status;
        if (waitpid(pids[i], &status, 0) != pids[i]) {
            perror("waitpid");
            exit(1);
        }
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
            ok++;
        else
            fprintf(stderr, "child %d: status 0x%x\n", i, status);
    }
    return ok;
}

static int clone_mode(const char *how, int children)
{
    wave(&parent_lock);
    pid_t pids[CHILDREN];
    for (int i = 0; i < children; i++) {
        pids[i] = start_child(how, i);
        if (pids[i] < 0) {
            perror(how);
            return 1;
        }
    }
    for (int w = 0; w < PARENT_WAVES; w++)
        wave(&parent_lock);
    int ok = wait_children(pids, children);
    printf("parent-threads %d\n", threads_started);
    printf("parent-uses %d\n", atomic_load(&uses));
    printf("children-ok %d\n", ok);
    return ok == children ? 0 : 1;
}

static int vfork_child(void *arg)
{
    (void)arg;
    for (int i = 0; i < USES; i++) {
        CHECK(pthread_mutex_lock(&child_lock)); /* @vfork-child-lock */
        CHECK(pthread_mutex_unlock(&child_lock));
    }
    return 0;
}

static int vfork_mode(void)
{
    for (int i = 0; i < USES; i++) {
        CHECK(pthread_mutex_lock(&parent_lock)); /* @parent-lock */
        atomic_fetch_add(&uses, 1);
        CHECK(pthread_mutex_unlock(&parent_lock));
    }
    static char stack[256 * 1024];
    pid_t pids[2];
    pids[0] = clone(vfork_child, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD, NULL);
    if (pids[0] < 0) {
        perror("clone");
        return 1;
    }
    pids[1] = vfork();
    if (pids[1] < 0) {
        perror("vfork");
        return 1;
    }
    if (pids[1] == 0)
        _exit(vfork_child(NULL));
    int ok = wait_children(pids, 2);
    printf("parent-threads %d\n", threads_started);
    printf("parent-uses %d\n", atomic_load(&uses));
    printf("children-ok %d\n", ok);
    return ok == 2 ? 0 : 1;
}

int main(int argc, char **argv)
{
    const char *mode = argc >= 2 ? argv[1] : "";
    printf("pid %d\n", (int)getpid());
    printf("parent_lock %p\n", (void *)&parent_lock);
    printf("child_lock %p\n", (void *)&child_lock);
    /* Nothing buffered is copied into a child to be written twice. */
    fflush(stdout);
    if (strcmp(mode, "clone") == 0 && argc == 3)
        return clone_mode(argv[2], CHILDREN);
    if (strcmp(mode, "cut-off") == 0) {
        child_c11_threads = 1;
        return clone_mode("asm", 1);
    }
    if (strcmp(mode, "vfork") == 0)
        return vfork_mode();
    fprintf(stderr,
            "usage: %s clone syscall|clone3|sys-fork|glibc|glibc-small|_Fork|asm|asm-late | "
            "cut-off | vfork\n",
            argv[0]);
    return 2;
}
