/* Ground truth for signals arriving while a thread waits.
 *
 *   signals sem-eintr   SIGUSR1's handler is installed without SA_RESTART.
 *                       main blocks in sem_wait (value 0), then in
 *                       sem_timedwait (value 0, deadline 30 s away); a
 *                       helper thread sends SIGUSR1 to main once main is
 *                       blocked in the futex system call. Both calls return
 *                       -1 with errno EINTR.
 *   signals in-lock     a holder thread locks busy; main blocks in
 *                       pthread_mutex_lock(busy). Once main is blocked in
 *                       the futex system call, the holder sends SIGUSR2 to
 *                       main, whose handler locks and unlocks sig_lock K
 *                       times; after the handler ran, the holder unlocks
 *                       busy and main gets it.
 *   signals in-condwait main waits on cv with cv_lock. Once main is blocked,
 *                       a helper sends SIGUSR2 (same handler); after the
 *                       handler ran it sets the predicate and signals cv.
 *
 * A watchdog alarm(10) kills the program (SIGALRM) if it ever hangs.
 *
 * Output: "pid <pid>", "sig_lock <addr>", "busy <addr>", "cv_lock <addr>",
 * "handler-locks <n>", and per mode "sem_wait -1 EINTR",
 * "sem_timedwait -1 EINTR", "handler-runs 2"; "lock 0"; "cond_wait 0",
 * "cond-waits <calls of pthread_cond_wait>". */
#include "common.h"

#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#define K 9

static pthread_mutex_t sig_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t busy = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t cv_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int ready;
static sem_t sem;
static pthread_t main_thread;
static int main_tid;
static atomic_int handler_runs;
static atomic_int handler_locks;
static atomic_int done;

static void on_usr1(int sig)
{
    (void)sig;
    atomic_fetch_add(&handler_runs, 1);
}

static void on_usr2(int sig)
{
    (void)sig;
    int saved = errno;
    for (int i = 0; i < K; i++) {
        if (pthread_mutex_lock(&sig_lock) == 0) { /* @handler-lock */
            atomic_fetch_add(&handler_locks, 1);
            pthread_mutex_unlock(&sig_lock);
        }
    }
    atomic_fetch_add(&handler_runs, 1);
    errno = saved;
}

static void install(int sig, void (*fn)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fn;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART */
    if (sigaction(sig, &sa, NULL) != 0) {
        perror("sigaction");
        exit(1);
    }
}

static void wait_until_main_blocked(void)
{
    while (!in_futex_wait(main_tid))
        sleep_ms(1);
    sleep_ms(5);
    while (!in_futex_wait(main_tid))
        sleep_ms(1);
}

/* sem-eintr: interrupt main twice (sem_wait, then sem_timedwait). */
static void *interrupter(void *arg)
{
    (void)arg;
    for (int round = 1; round <= 2; round++) {
        wait_until_main_blocked();
        pthread_kill(main_thread, SIGUSR1);
        while (atomic_load(&done) < round)
            sleep_ms(1);
    }
    return NULL;
}

static int sem_eintr(void)
{
    install(SIGUSR1, on_usr1);
    if (sem_init(&sem, 0, 0) != 0) {
        perror("sem_init");
        return 1;
    }
    pthread_t t;
    CHECK(pthread_create(&t, NULL, interrupter, NULL));
    errno = 0;
    int rc = sem_wait(&sem); /* @sem-wait */
    int err = errno;
    printf("sem_wait %d %s\n", rc, err == EINTR ? "EINTR" : strerror(err));
    fflush(stdout);
    atomic_store(&done, 1);

    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 30;
    errno = 0;
    rc = sem_timedwait(&sem, &deadline); /* @sem-timedwait */
    err = errno;
    printf("sem_timedwait %d %s\n", rc, err == EINTR ? "EINTR" : strerror(err));
    atomic_store(&done, 2);
    CHECK(pthread_join(t, NULL));
    printf("handler-runs %d\n", atomic_load(&handler_runs));
    return 0;
}

/* in-lock: the handler runs while main is inside a contended lock. */
static void *holder(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&busy)); /* @holder-lock */
    atomic_store(&done, 1);
    wait_until_main_blocked();
    pthread_kill(main_thread, SIGUSR2);
    while (atomic_load(&handler_runs) == 0)
        sleep_ms(1);
    sleep_ms(5);
    CHECK(pthread_mutex_unlock(&busy));
    return NULL;
}

static int in_lock(void)
{
    install(SIGUSR2, on_usr2);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, holder, NULL));
    while (!atomic_load(&done))
        sleep_ms(1);
    int rc = pthread_mutex_lock(&busy); /* @main-lock */
    printf("lock %d\n", rc);
    CHECK(pthread_mutex_unlock(&busy));
    CHECK(pthread_join(t, NULL));
    printf("handler-locks %d\n", atomic_load(&handler_locks));
    return 0;
}

/* in-condwait: the handler runs while main waits on a cond. */
static void *notifier(void *arg)
{
    (void)arg;
    wait_until_main_blocked();
    pthread_kill(main_thread, SIGUSR2);
    while (atomic_load(&handler_runs) == 0)
        sleep_ms(1);
    CHECK(pthread_mutex_lock(&cv_lock)); /* @notifier-lock */
    ready = 1;
    CHECK(pthread_cond_signal(&cv));
    CHECK(pthread_mutex_unlock(&cv_lock));
    return NULL;
}

static int in_condwait(void)
{
    install(SIGUSR2, on_usr2);
    CHECK(pthread_mutex_lock(&cv_lock)); /* @main-cv-lock */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, notifier, NULL));
    int rc = 0, waits = 0;
    while (!ready && rc == 0) {
        rc = pthread_cond_wait(&cv, &cv_lock); /* @cond-wait */
        waits++;
    }
    printf("cond_wait %d\n", rc);
    printf("cond-waits %d\n", waits);
    CHECK(pthread_mutex_unlock(&cv_lock));
    CHECK(pthread_join(t, NULL));
    printf("handler-locks %d\n", atomic_load(&handler_locks));
    return 0;
}

int main(int argc, char **argv)
{
    alarm(10); /* watchdog: SIGALRM kills a hung run */
    main_thread = pthread_self();
    main_tid = (int)syscall(SYS_gettid);
    printf("pid %d\n", (int)getpid());
    printf("sig_lock %p\n", (void *)&sig_lock);
    printf("busy %p\n", (void *)&busy);
    printf("cv_lock %p\n", (void *)&cv_lock);
    printf("sem %p\n", (void *)&sem);
    fflush(stdout);
    if (argc == 2 && strcmp(argv[1], "sem-eintr") == 0)
        return sem_eintr();
    if (argc == 2 && strcmp(argv[1], "in-lock") == 0)
        return in_lock();
    if (argc == 2 && strcmp(argv[1], "in-condwait") == 0)
        return in_condwait();
    fprintf(stderr, "usage: signals sem-eintr|in-lock|in-condwait\n");
    return 2;
}
