/* Blocking calls made after long runs of calls that did not block. The
 * shim then times calls without reading a clock (the kernel's rseq
 * pointer: shim/src/recorder/time/call_timer/) and works out how long a call
 * blocked from the thread's CPU time. Each thread but the last makes CALM
 * write+read pairs on its own pipe (none blocks), then blocks in one
 * known way and measures how long; three rounds. Each prints the sum
 * (`name_ns N`):
 *
 *   sleeper      nanosleep 30 ms
 *   reader       reads a pipe that main writes to 40 ms later
 *   poller       polls an empty pipe with a 25 ms timeout
 *   signalled    reads a pipe that main writes to 40 ms later; 15 ms in,
 *                main sends it SIGUSR1, whose handler (SA_RESTART) writes
 *                to a pipe: a hooked call inside the blocked one
 *   interrupted  no calm calls (its calls keep blocking, so the shim times
 *                them with the clock): reads a pipe nobody writes to until
 *                main, 40 ms later, sends it SIGUSR2, whose handler (no
 *                SA_RESTART) writes to a pipe; the read fails with EINTR
 *
 * Arguments: none. */
#include "common.h"
#include <poll.h>
#include <stdatomic.h>

#define CALM 300
#define ROUNDS 3

enum { SLEEPER, READER, POLLER, SIGNALLED, INTERRUPTED, THREADS };
static const char *names[THREADS] = { "sleeper", "reader", "poller", "signalled", "interrupted" };
static long long blocked_ns[THREADS];
static int data_pipe[THREADS][2];
static int handler_pipe[2];
static atomic_int about_to_block[THREADS];
static atomic_int tids[THREADS];
static atomic_int handled;

static void on_signal(int sig)
{
    (void)sig;
    int saved = errno;
    char byte = 's';
    if (write(handler_pipe[1], &byte, 1) == 1)
        atomic_fetch_add(&handled, 1);
    errno = saved;
}

static void *run(void *arg)
{
    int me = (int)(long)arg;
    atomic_store(&tids[me], (int)syscall(SYS_gettid));
    for (int round = 0; round < ROUNDS; round++) {
        if (me != INTERRUPTED)
            calm_pipe_calls(CALM);
        char byte;
        struct pollfd pfd = { .fd = data_pipe[me][0], .events = POLLIN };
        struct timespec ts = { 0, 30 * 1000000L };
        long long t0 = now_ns();
        switch (me) {
        case SLEEPER:
            while (nanosleep(&ts, &ts) != 0 && errno == EINTR) /* marker: sleeper sleeps */
                ;
            break;
        case POLLER:
            if (poll(&pfd, 1, 25) != 0) /* marker: poller polls */
                exit(3);
            break;
        case INTERRUPTED:
            atomic_store(&about_to_block[me], round + 1);
            if (read(data_pipe[me][0], &byte, 1) != -1 || errno != EINTR) /* marker: interrupted read */
                exit(3);
            break;
        default:
            atomic_store(&about_to_block[me], round + 1);
            if (read(data_pipe[me][0], &byte, 1) != 1) /* marker: blocking read */
                exit(3);
        }
        blocked_ns[me] += now_ns() - t0;
    }
    return NULL;
}

int main(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR1, &sa, NULL) != 0 || pipe(handler_pipe) != 0)
        return 3;
    sa.sa_flags = 0;
    if (sigaction(SIGUSR2, &sa, NULL) != 0)
        return 3;
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        if (pipe(data_pipe[i]) != 0)
            return 3;
        CHECK(pthread_create(&t[i], NULL, run, (void *)(long)i));
        CHECK(pthread_setname_np(t[i], names[i]));
    }
    for (int round = 1; round <= ROUNDS; round++) {
        /* A signal sent before the interrupted thread is in its read would
         * leave it blocked for good: wait until it is. */
        while (atomic_load(&about_to_block[READER]) < round ||
               atomic_load(&about_to_block[SIGNALLED]) < round ||
               atomic_load(&about_to_block[INTERRUPTED]) < round ||
               !in_syscall(atomic_load(&tids[INTERRUPTED]), SYS_read))
            sleep_ms(1);
        sleep_ms(15);
        CHECK(pthread_kill(t[SIGNALLED], SIGUSR1));
        sleep_ms(25);
        CHECK(pthread_kill(t[INTERRUPTED], SIGUSR2));
        if (write(data_pipe[READER][1], "r", 1) != 1 || write(data_pipe[SIGNALLED][1], "s", 1) != 1)
            return 3;
    }
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_join(t[i], NULL));
    for (int i = 0; i < THREADS; i++)
        printf("%s_ns %lld\n", names[i], blocked_ns[i]);
    printf("handled %d\n", atomic_load(&handled));
    return 0;
}
