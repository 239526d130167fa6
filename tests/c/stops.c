/* Why threads stop: each thread blocks in one known way, measures how long
 * it blocked, and prints it (`name_ns N`), so the report's per-class totals
 * can be compared with what the program saw.
 *
 *   holder      takes `shared`, sleeps 120 ms holding it (nanosleep)
 *   locker      waits for `shared` while holder sleeps (mutex wait)
 *   condwaiter  waits on a condition variable that main signals (cond wait)
 *   reader      reads a pipe main writes to later, through a wrapper (read)
 *   poller      polls an empty pipe with a 70 ms timeout (poll)
 *   quiet       sleeps 20 ms holding `alone`, which nobody else wants
 *   futexer     waits on a futex word through syscall(), as Rust's std
 *               locks do, until main wakes it (futex)
 *   main        sleeps before signalling and writing, then joins them all
 *
 * Arguments: none. */
#include "common.h"
#include <linux/futex.h>
#include <poll.h>
#include <stdatomic.h>

static pthread_mutex_t shared = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t alone = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t cond_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int signalled;
static atomic_int holder_has_it;
static int data_pipe[2], empty_pipe[2];
static atomic_int futex_word;

static long long holder_sleep_ns, locker_wait_ns, cond_wait_ns, read_ns, poll_ns, quiet_sleep_ns,
    futex_wait_ns;

/* A whole sleep, however often a signal interrupts it. */
static void sleep_whole_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) /* marker: holder sleeps */
        ;
}

static void *holder(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&shared)); /* marker: holder takes shared */
    atomic_store(&holder_has_it, 1);
    long long t0 = now_ns();
    sleep_whole_ms(120);
    holder_sleep_ns = now_ns() - t0;
    CHECK(pthread_mutex_unlock(&shared));
    return NULL;
}

static void *locker(void *arg)
{
    (void)arg;
    while (!atomic_load(&holder_has_it))
        ;
    long long t0 = now_ns();
    CHECK(pthread_mutex_lock(&shared)); /* marker: locker waits */
    locker_wait_ns = now_ns() - t0;
    CHECK(pthread_mutex_unlock(&shared));
    return NULL;
}

static void *condwaiter(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&cond_mutex));
    long long t0 = now_ns();
    while (!signalled)
        CHECK(pthread_cond_wait(&cond, &cond_mutex)); /* marker: cond wait */
    cond_wait_ns = now_ns() - t0;
    CHECK(pthread_mutex_unlock(&cond_mutex));
    return NULL;
}

/* A wrapper a user's signature file can name. */
__attribute__((noinline)) static ssize_t wait_for_data(int fd, char *buf, size_t n)
{
    return read(fd, buf, n); /* marker: reader reads */
}

static void *reader(void *arg)
{
    (void)arg;
    char buf[16];
    long long t0 = now_ns();
    if (wait_for_data(data_pipe[0], buf, sizeof buf) != 5) {
        perror("read");
        exit(3);
    }
    read_ns = now_ns() - t0;
    return NULL;
}

static void *poller(void *arg)
{
    (void)arg;
    struct pollfd p = { .fd = empty_pipe[0], .events = POLLIN };
    long long t0 = now_ns();
    if (poll(&p, 1, 70) != 0) { /* marker: poller polls */
        perror("poll");
        exit(3);
    }
    poll_ns = now_ns() - t0;
    return NULL;
}

static void *quiet(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&alone));
    long long t0 = now_ns();
    sleep_whole_ms(20);
    quiet_sleep_ns = now_ns() - t0;
    CHECK(pthread_mutex_unlock(&alone));
    return NULL;
}

static void *futexer(void *arg)
{
    (void)arg;
    long long t0 = now_ns();
    while (atomic_load(&futex_word) == 0) /* a wake before the wait is seen here */
        syscall(SYS_futex, &futex_word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0); /* marker: futex wait */
    futex_wait_ns = now_ns() - t0;
    return NULL;
}

int main(void)
{
    if (pipe(data_pipe) || pipe(empty_pipe)) {
        perror("pipe");
        return 3;
    }
    void *(*bodies[])(void *) = { holder, locker, condwaiter, reader, poller, quiet, futexer };
    const char *names[] = { "holder", "locker", "condwaiter", "reader", "poller", "quiet", "futexer" };
    enum { N = sizeof bodies / sizeof bodies[0] };
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        CHECK(pthread_create(&t[i], NULL, bodies[i], NULL));
        CHECK(pthread_setname_np(t[i], names[i]));
    }
    long long main_sleep_ns = 0, t0 = now_ns();
    sleep_whole_ms(80);
    main_sleep_ns += now_ns() - t0;
    CHECK(pthread_mutex_lock(&cond_mutex));
    signalled = 1;
    CHECK(pthread_cond_signal(&cond));
    CHECK(pthread_mutex_unlock(&cond_mutex));
    atomic_store(&futex_word, 1);
    syscall(SYS_futex, &futex_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    t0 = now_ns();
    sleep_whole_ms(10);
    main_sleep_ns += now_ns() - t0;
    if (write(data_pipe[1], "hello", 5) != 5) {
        perror("write");
        return 3;
    }
    long long main_join_ns = 0;
    for (int i = 0; i < N; i++) {
        t0 = now_ns();
        CHECK(pthread_join(t[i], NULL)); /* marker: main joins */
        main_join_ns += now_ns() - t0;
    }
    printf("holder_sleep_ns %lld\nlocker_wait_ns %lld\ncond_wait_ns %lld\nread_ns %lld\n"
           "poll_ns %lld\nquiet_sleep_ns %lld\nmain_sleep_ns %lld\nmain_join_ns %lld\n"
           "futex_wait_ns %lld\n",
           holder_sleep_ns, locker_wait_ns, cond_wait_ns, read_ns, poll_ns, quiet_sleep_ns,
           main_sleep_ns, main_join_ns, futex_wait_ns);
    return 0;
}
