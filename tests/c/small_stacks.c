/* Small stacks: hooked calls made with little stack left behave as they do
 * without the shim, and the shim's own frames stay within its stated budget
 * (HOOK_STACK_BUDGET, shim/src/recorder/base/own_stack.rs).
 *
 *   small_stacks budget         prints "OPERATION BYTES" per operation: how
 *                               far below its caller's frame it wrote, on a
 *                               painted stack (first sight and again)
 *   small_stacks fork VARIANT   a thread on a PTHREAD_STACK_MIN stack with
 *                               LEFT bytes left forks; the child does
 *                               VARIANT: "_exit" (at once), "lock" (takes a
 *                               lock first) or "exit" (exit(), destructors)
 *   small_stacks exit           such a thread calls exit(5)
 *   small_stacks cancel         such threads are cancelled in
 *                               pthread_cond_wait, sem_wait and nanosleep
 *   small_stacks signal         a fresh thread's handler, on a MINSIGSTKSZ
 *                               alternate stack with LEFT bytes left, posts
 *                               a semaphore and takes a mutex (trylock,
 *                               lock), ROUNDS times
 *
 * Every mode prints what happened; the test compares it with the run
 * without the shim. Built with -Wl,-z,now: lazy binding's resolver would
 * need more stack than the calls themselves. */
#include "common.h"

#include <alloca.h>
#include <link.h>
#include <semaphore.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>

/* Stack left for the calls: the shim's budget (2 KiB) and the C library's
 * own frames (under 1 KiB here) fit. */
#define LEFT 3072
#define ROUNDS 20
#define PAINT 0xA5
#define BUDGET_STACK (512 * 1024)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t contended = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static pthread_rwlock_t rwlock = PTHREAD_RWLOCK_INITIALIZER;
static pthread_spinlock_t spin;
static pthread_barrier_t barrier;
static sem_t sem, ready;
static const char *variant = "_exit";

/* A stack of `size` bytes with an inaccessible page below it: running out
 * faults at once instead of writing over other memory. */
static char *map_stack(size_t size)
{
    char *p = mmap(NULL, size + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED || mprotect(p, 4096, PROT_NONE) != 0) {
        perror("mmap");
        exit(3);
    }
    return p + 4096;
}

__attribute__((noinline)) static char *stack_here(void)
{
    char here;
    char *volatile at = &here;
    return at;
}

/* Calls op() with about `left` bytes of stack above `lo` left. */
__attribute__((noinline)) static void with_left(char *lo, size_t left, void (*op)(void))
{
    size_t room = (size_t)(stack_here() - lo);
    volatile char *pad = alloca(room > left ? room - left : 1);
    pad[0] = 1;
    op();
    __asm__ volatile("" : : "r"(pad) : "memory");
}

static void report_status(const char *who, int status)
{
    if (WIFEXITED(status))
        printf("%s exited %d\n", who, WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        printf("%s killed by signal %d\n", who, WTERMSIG(status));
    else
        printf("%s status 0x%x\n", who, status);
    fflush(stdout);
}

struct job {
    char *lo;
    void (*op)(void);
    size_t left;
};

static void *small_thread_main(void *arg)
{
    struct job *job = arg;
    with_left(job->lo, job->left, job->op);
    return NULL;
}

/* Runs op() on a new thread whose stack is PTHREAD_STACK_MIN bytes, with
 * LEFT of them left, and waits for it. */
static void on_small_thread(void (*op)(void))
{
    struct job job = { map_stack(PTHREAD_STACK_MIN), op, LEFT };
    pthread_attr_t attr;
    pthread_t thread;
    CHECK(pthread_attr_init(&attr));
    CHECK(pthread_attr_setstack(&attr, job.lo, PTHREAD_STACK_MIN));
    CHECK(pthread_create(&thread, &attr, small_thread_main, &job));
    CHECK(pthread_join(thread, NULL));
}

/* ------------------------------------------------------------ fork, exit */

static void fork_from_here(void)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(3);
    }
    if (pid == 0) {
        if (strcmp(variant, "lock") == 0) {
            CHECK(pthread_mutex_lock(&lock)); /* @child-lock */
            CHECK(pthread_mutex_unlock(&lock));
            _exit(7);
        }
        if (strcmp(variant, "exit") == 0)
            exit(6);
        _exit(5);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid) {
        perror("waitpid");
        exit(3);
    }
    report_status("child", status);
}

static void exit_from_here(void)
{
    printf("exiting\n");
    fflush(stdout);
    exit(5);
}

/* ---------------------------------------------------------- cancellation */

/* What the last cancelled thread's cleanup handler saw (printed after the
 * join: stdio needs more stack than the thread has). */
static const char *cleaned_up_after = "nothing";

static void cleanup(void *what)
{
    cleaned_up_after = what;
}

static void unlock(void *mutex)
{
    pthread_mutex_unlock(mutex);
}

/* Set once the thread is cancelled: until then it waits without reaching
 * a cancellation point, so that it acts on the cancel at the next one. */
static volatile int cancel_sent;
/* Wait for the cancel at the cancellation point, blocked in it: the kernel
 * then interrupts the call with glibc's cancellation signal, whose frame
 * needs stack of its own. */
static int cancel_blocked;

static void wait_for_cancel_sent(void)
{
    sem_post(&ready);
    if (!cancel_blocked)
        while (!cancel_sent)
            sched_yield();
}

static void cancelled_in_cond_wait(void)
{
    pthread_cleanup_push(cleanup, "pthread_cond_wait");
    CHECK(pthread_mutex_lock(&lock));
    /* The mutex is taken again before the cleanup handlers run. */
    pthread_cleanup_push(unlock, &lock);
    wait_for_cancel_sent();
    for (;;)
        pthread_cond_wait(&cond, &lock);
    pthread_cleanup_pop(1);
    pthread_cleanup_pop(1);
}

static void cancelled_in_sem_wait(void)
{
    pthread_cleanup_push(cleanup, "sem_wait");
    wait_for_cancel_sent();
    for (;;)
        sem_wait(&sem);
    pthread_cleanup_pop(1);
}

static void cancelled_in_nanosleep(void)
{
    pthread_cleanup_push(cleanup, "nanosleep");
    wait_for_cancel_sent();
    for (;;) {
        struct timespec ts = { 1, 0 };
        nanosleep(&ts, NULL);
    }
    pthread_cleanup_pop(1);
}

static void *idle_until_cancelled(void *arg)
{
    for (;;)
        sleep_ms(1000);
    return arg;
}

static volatile int target_tid;

static void *cancel_target(void *arg)
{
    struct job *job = arg;
    target_tid = gettid_now();
    with_left(job->lo, job->left, job->op);
    return NULL;
}

/* Cancels a thread on a small stack at its cancellation point `op`,
 * either reaching it with the cancel pending or blocked in system call
 * `nr` (-1: the former), and prints what its cleanup saw. */
static void cancel_one(void (*op)(void), long nr)
{
    cancel_blocked = nr >= 0;
    cancel_sent = 0;
    /* Blocked: the kernel's signal frame comes on top. */
    size_t left = LEFT + (cancel_blocked ? (size_t)sysconf(_SC_MINSIGSTKSZ) : 0);
    struct job job = { map_stack(PTHREAD_STACK_MIN), op, left };
    pthread_attr_t attr;
    pthread_t thread;
    void *result;
    CHECK(pthread_attr_init(&attr));
    CHECK(pthread_attr_setstack(&attr, job.lo, PTHREAD_STACK_MIN));
    CHECK(pthread_create(&thread, &attr, cancel_target, &job));
    while (sem_wait(&ready) != 0)
        ;
    if (cancel_blocked)
        while (!in_syscall(target_tid, nr))
            sched_yield();
    CHECK(pthread_cancel(thread));
    cancel_sent = 1;
    CHECK(pthread_join(thread, &result));
    printf("%s %s; cleanup after %s\n", result == PTHREAD_CANCELED ? "cancelled" : "not cancelled",
           cancel_blocked ? "blocked" : "at entry", cleaned_up_after);
    fflush(stdout);
}

static void cancellations(void)
{
    /* glibc loads its unwinder at the first cancellation, a deep dlopen:
     * let that happen on a normal stack. */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, idle_until_cancelled, NULL));
    CHECK(pthread_cancel(t));
    CHECK(pthread_join(t, NULL));
    cancel_one(cancelled_in_cond_wait, -1);
    cancel_one(cancelled_in_sem_wait, -1);
    cancel_one(cancelled_in_nanosleep, -1);
    cancel_one(cancelled_in_cond_wait, SYS_futex);
    cancel_one(cancelled_in_sem_wait, SYS_futex);
    cancel_one(cancelled_in_nanosleep, SYS_clock_nanosleep);
}

/* --------------------------------------------------------------- signals */

static char *alt_lo;
static volatile sig_atomic_t handled;
static int trylock_busy;

static void in_handler(void)
{
    sem_post(&sem); /* async-signal-safe */
    /* The interrupted thread never holds `lock`: taking it is safe here. */
    int rc = pthread_mutex_trylock(&lock);
    if (rc == 0)
        pthread_mutex_unlock(&lock);
    else
        trylock_busy++;
    pthread_mutex_lock(&lock);
    pthread_mutex_unlock(&lock);
    handled++;
}

static void on_signal(int sig)
{
    (void)sig;
    with_left(alt_lo, LEFT, in_handler);
}

static void *signalled_thread(void *arg)
{
    (void)arg;
    size_t size = MINSIGSTKSZ;
    alt_lo = map_stack(size);
    stack_t ss = { .ss_sp = alt_lo, .ss_size = size, .ss_flags = 0 };
    if (sigaltstack(&ss, NULL) != 0) {
        perror("sigaltstack");
        exit(3);
    }
    for (int i = 0; i < ROUNDS; i++) {
        CHECK(pthread_kill(pthread_self(), SIGUSR1));
        while (sem_wait(&sem) != 0)
            ;
    }
    return NULL;
}

static void signals(void)
{
    printf("sem %p\nlock %p\n", (void *)&sem, (void *)&lock);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGUSR1, &sa, NULL));
    pthread_t t;
    CHECK(pthread_create(&t, NULL, signalled_thread, NULL));
    CHECK(pthread_join(t, NULL));
    printf("handled %d, trylock busy %d\n", (int)handled, trylock_busy);
}

/* ---------------------------------------------------------------- budget */

static char *budget_lo;

__attribute__((noinline)) static void paint(char *below)
{
    for (volatile char *p = budget_lo; p < below; p++)
        *p = (char)PAINT;
}

/* Bytes written below `from` since it was painted. */
__attribute__((noinline)) static size_t deepest(char *from)
{
    char *p = budget_lo;
    while (p < from && *p == (char)PAINT)
        p++;
    return (size_t)(from - p);
}

static void op_lock(void) { CHECK(pthread_mutex_lock(&lock)); CHECK(pthread_mutex_unlock(&lock)); }
static void op_trylock(void) { if (pthread_mutex_trylock(&lock) == 0) CHECK(pthread_mutex_unlock(&lock)); }
static void op_rwlock(void)
{
    CHECK(pthread_rwlock_rdlock(&rwlock));
    CHECK(pthread_rwlock_unlock(&rwlock));
    CHECK(pthread_rwlock_wrlock(&rwlock));
    CHECK(pthread_rwlock_unlock(&rwlock));
}
static void op_spin(void) { CHECK(pthread_spin_lock(&spin)); CHECK(pthread_spin_unlock(&spin)); }
static void op_sem(void) { sem_post(&sem); while (sem_wait(&sem) != 0) ; }
static void op_barrier(void) { pthread_barrier_wait(&barrier); }
static void op_init(void)
{
    pthread_mutex_t m;
    CHECK(pthread_mutex_init(&m, NULL));
    CHECK(pthread_mutex_lock(&m));
    CHECK(pthread_mutex_unlock(&m));
    CHECK(pthread_mutex_destroy(&m));
}
static void op_signal(void) { CHECK(pthread_cond_signal(&cond)); CHECK(pthread_cond_broadcast(&cond)); }
static void op_timedwait(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 200000;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    CHECK(pthread_mutex_lock(&lock));
    int rc = pthread_cond_timedwait(&cond, &lock, &ts);
    if (rc != 0 && rc != ETIMEDOUT)
        die_rc("pthread_cond_timedwait", rc, __LINE__);
    CHECK(pthread_mutex_unlock(&lock));
}
static void op_sleep(void) { sleep_ms(2); }
static void op_pipe(void) { calm_pipe_calls(4); }
static void *nothing(void *arg) { return arg; }
static void op_create(void)
{
    pthread_t t;
    CHECK(pthread_create(&t, NULL, nothing, NULL));
    CHECK(pthread_join(t, NULL));
}

static volatile int waiter_tid;
static void *holder(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&contended));
    sem_post(&ready);
    /* Let go once the measured thread waits for it. */
    while (!in_futex_wait(waiter_tid))
        sched_yield();
    CHECK(pthread_mutex_unlock(&contended));
    return NULL;
}
static void op_contended(void)
{
    pthread_t t;
    waiter_tid = gettid_now();
    CHECK(pthread_create(&t, NULL, holder, NULL));
    while (sem_wait(&ready) != 0)
        ;
    CHECK(pthread_mutex_lock(&contended)); /* blocks until the holder lets go */
    CHECK(pthread_mutex_unlock(&contended));
    CHECK(pthread_join(t, NULL));
}

static void op_fork(void) { variant = "_exit"; fork_from_here(); }

/* The child's first lock makes its trace: measured in the child. */
static void op_fork_child_lock(void)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        char *from = stack_here() - 64;
        paint(from);
        op_lock();
        printf("fork-child-lock %zu\n", deepest(from));
        fflush(stdout);
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
}

static char *exit_from;
static void at_exit_measure(void)
{
    if (exit_from)
        printf("exit %zu\n", deepest(exit_from));
}
static void op_exit(void) { exit(0); }

/* The shim's thread-local storage: glibc takes it, with the program's,
 * from the top of a stack given with pthread_attr_setstack. */
static int add_shim_tls(struct dl_phdr_info *info, size_t size, void *total)
{
    (void)size;
    if (!info->dlpi_name || !strstr(info->dlpi_name, "syncshim"))
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_TLS) {
            size_t align = ph->p_align ? ph->p_align : 1;
            *(size_t *)total += (ph->p_memsz + align - 1) / align * align;
        }
    }
    return 0;
}

static void *thread_life(void *arg)
{
    op_lock();
    return arg;
}

/* A thread's whole life on a painted stack of its own (its start, a lock,
 * its end and the destructors then): the bytes it used below its
 * thread-local storage. */
static void op_thread(void)
{
    const size_t size = 64 * 1024;
    char *lo = map_stack(size);
    memset(lo, PAINT, size);
    pthread_attr_t attr;
    pthread_t t;
    CHECK(pthread_attr_init(&attr));
    CHECK(pthread_attr_setstack(&attr, lo, size));
    CHECK(pthread_create(&t, &attr, thread_life, NULL));
    CHECK(pthread_join(t, NULL));
    size_t tls = 0;
    dl_iterate_phdr(add_shim_tls, &tls);
    char *p = lo;
    while (*p == (char)PAINT)
        p++;
    /* glibc's thread descriptor (pthread_t) sits at the top, the
     * thread-local storage below it, then the stack. */
    printf("thread %zu\n", (size_t)((char *)t - p) - tls);
    printf("shim-tls %zu\n", tls);
}

struct op {
    const char *name;
    void (*run)(void);
};

static const struct op ops[] = {
    { "lock", op_lock },         { "trylock", op_trylock },   { "rwlock", op_rwlock },
    { "spin", op_spin },         { "sem", op_sem },           { "barrier", op_barrier },
    { "init", op_init },         { "cond-signal", op_signal }, { "cond-timedwait", op_timedwait },
    { "sleep", op_sleep },       { "pipe", op_pipe },         { "create", op_create },
    { "contended", op_contended }, { "fork", op_fork },
};

static void *budget_main(void *arg)
{
    (void)arg;
    char *from = stack_here() - 64;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        size_t most = 0;
        /* First sight (a new site, a new object) and again. */
        for (int round = 0; round < 2; round++) {
            paint(from);
            ops[i].run();
            size_t d = deepest(from);
            most = d > most ? d : most;
        }
        printf("%s %zu\n", ops[i].name, most);
        fflush(stdout);
    }
    op_thread();
    paint(from);
    op_fork_child_lock();
    /* Last: exit measures itself in an atexit handler, which runs inside
     * exit on this same stack. */
    paint(from);
    exit_from = from;
    op_exit();
    return NULL;
}

static void budget(void)
{
    budget_lo = map_stack(BUDGET_STACK);
    atexit(at_exit_measure);
    pthread_attr_t attr;
    pthread_t t;
    CHECK(pthread_attr_init(&attr));
    CHECK(pthread_attr_setstack(&attr, budget_lo, BUDGET_STACK));
    CHECK(pthread_create(&t, &attr, budget_main, NULL));
    CHECK(pthread_join(t, NULL));
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "budget";
    setvbuf(stdout, NULL, _IOFBF, 1 << 16);
    sem_init(&sem, 0, 0);
    sem_init(&ready, 0, 0);
    CHECK(pthread_spin_init(&spin, PTHREAD_PROCESS_PRIVATE));
    CHECK(pthread_barrier_init(&barrier, NULL, 1));
    if (strcmp(mode, "budget") == 0) {
        budget();
    } else if (strcmp(mode, "fork") == 0) {
        variant = argc > 2 ? argv[2] : "_exit";
        printf("pid %d\nlock %p\n", (int)getpid(), (void *)&lock);
        on_small_thread(fork_from_here);
    } else if (strcmp(mode, "exit") == 0) {
        on_small_thread(exit_from_here);
        printf("exit returned\n");
    } else if (strcmp(mode, "cancel") == 0) {
        cancellations();
    } else if (strcmp(mode, "signal") == 0) {
        signals();
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    printf("done\n");
    return 0;
}
