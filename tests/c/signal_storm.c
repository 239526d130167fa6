/* Lock calls interrupted by signal handlers that lock too.
 *
 *   signal_storm N   main locks and unlocks `a` N times, uncontended, while
 *                    a helper thread sends it SIGUSR1 every 20 µs until
 *                    main is done; the handler locks and unlocks `b` once
 *                    per signal (never `a`, which main may hold) and counts.
 *
 * Locking in a handler is outside POSIX's async-signal-safe list, but
 * programs do it with a lock the interrupted code cannot hold; a profiler
 * must neither corrupt its counts nor the program's when they do. Every
 * lock call of main must be counted exactly, whatever the handlers did in
 * between; the handler's own calls are counted, or passed through and
 * counted as dropped if they came while main was inside the shim.
 *
 * Output: "a <addr>", "b <addr>", "a-locks <n>", "b-locks <n>". */
#include "common.h"
#include <stdatomic.h>

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t b = PTHREAD_MUTEX_INITIALIZER;
static volatile sig_atomic_t handled;
static atomic_int done;
static pthread_t main_thread;

static void on_signal(int sig)
{
    (void)sig;
    int saved = errno;
    CHECK(pthread_mutex_lock(&b));
    handled++;
    CHECK(pthread_mutex_unlock(&b));
    errno = saved;
}

/* main's lock call, at one line the shim sees before the storm. */
static __attribute__((noinline)) void take_a(void)
{
    CHECK(pthread_mutex_lock(&a));
    CHECK(pthread_mutex_unlock(&a));
}

static void *storm(void *arg)
{
    (void)arg;
    struct timespec gap = { 0, 20000 };
    while (!atomic_load(&done)) {
        pthread_kill(main_thread, SIGUSR1);
        nanosleep(&gap, NULL);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 2000000;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    main_thread = pthread_self();
    /* Each line once before the storm: the shim unwinds a line's stack the
     * first time it sees it, and a handler's lock call during that unwind
     * passes through uncounted (docs/limits.md). The handler's line is
     * seen here, in main, as the handler's own call: it is one function. */
    take_a();
    on_signal(0);
    pthread_t helper;
    CHECK(pthread_create(&helper, NULL, storm, NULL));
    for (long i = 1; i < n; i++)
        take_a();
    /* Blocked before anything else the shim sees for the first time (the
     * join's line): a signal still on its way stays pending, unhandled. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    atomic_store(&done, 1);
    CHECK(pthread_join(helper, NULL));
    printf("a %p\nb %p\na-locks %ld\nb-locks %ld\n", (void *)&a, (void *)&b, n, (long)handled);
    return 0;
}
