/* What the blocking-call hooks return, next to what the C library alone
 * returns: the test runs this with and without the shim and compares the
 * output line by line. Covers errors (errno), EINTR with and without
 * SA_RESTART, error-number returns, the variadic open's mode, partial
 * sleeps, poll counts and child statuses. Each part starts after a run
 * of calls that did not block, after which the shim times calls without a
 * clock (shim/src/recorder/time/call_timer/). */
#include "common.h"
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>

static void on_alarm(int sig)
{
    (void)sig;
}

/* Installs the SIGALRM handler with or without SA_RESTART and arms a
 * 30 ms one-shot timer. */
static void alarm_soon(int restart)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = restart ? SA_RESTART : 0;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = { { 0, 0 }, { 0, 30000 } };
    setitimer(ITIMER_REAL, &it, NULL);
}

#define SHOW(what, expr)                                                        \
    do {                                                                        \
        errno = 0;                                                              \
        long r_ = (long)(expr);                                                 \
        printf("%s: %ld errno=%d\n", what, r_, r_ < 0 ? errno : 0);             \
    } while (0)

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    char buf[64];
    int p[2];
    if (pipe(p))
        return 3;

    SHOW("read bad fd", read(-1, buf, sizeof buf));
    SHOW("write bad fd", write(-1, "x", 1));
    SHOW("pread on a pipe", pread(p[0], buf, 1, 0));
    SHOW("write pipe", write(p[1], "hello", 5));
    SHOW("read pipe", read(p[0], buf, sizeof buf));
    struct iovec iov = { buf, 3 };
    SHOW("writev", writev(p[1], &iov, 1));
    SHOW("readv", readv(p[0], &iov, 1));

    calm_pipe_calls(100);
    /* EINTR: a read with no data, interrupted by a signal without
     * SA_RESTART, fails; with SA_RESTART it restarts and gets the data a
     * child writes later. */
    alarm_soon(0);
    SHOW("read interrupted", read(p[0], buf, sizeof buf));
    calm_pipe_calls(100); /* so the child is forked from a thread that times calls for free */
    pid_t child = fork();
    if (child == 0) {
        sleep_ms(60);
        if (write(p[1], "late", 4) != 4)
            _exit(1);
        _exit(7);
    }
    alarm_soon(1);
    SHOW("read restarted", read(p[0], buf, sizeof buf));
    int status = 0;
    SHOW("waitpid is the child", waitpid(child, &status, 0) == child);
    printf("child status: exited=%d code=%d\n", WIFEXITED(status), WEXITSTATUS(status));
    SHOW("waitpid no child", waitpid(-1, &status, WNOHANG));
    calm_pipe_calls(100);

    calm_pipe_calls(100);
    /* Sleeps: an interrupted nanosleep leaves the rest; clock_nanosleep
     * returns its error number; sleep returns the seconds not slept. */
    struct timespec bad = { 0, 2000000000L }, rem;
    SHOW("nanosleep invalid", nanosleep(&bad, &rem));
    SHOW("clock_nanosleep invalid", clock_nanosleep(CLOCK_MONOTONIC, 0, &bad, NULL));
    SHOW("clock_nanosleep bad clock", clock_nanosleep(12345, 0, &bad, NULL));
    alarm_soon(0);
    struct timespec long_nap = { 5, 0 };
    int rc = nanosleep(&long_nap, &rem);
    printf("nanosleep interrupted: %d errno=%d rest>=4s=%d\n", rc, errno, rem.tv_sec >= 4);
    alarm_soon(0);
    printf("sleep interrupted: left %u of 3\n", sleep(3) >= 2 ? 2u : 0u);
    SHOW("usleep", usleep(1000));

    calm_pipe_calls(100);
    /* Polls. */
    struct pollfd pf = { .fd = p[0], .events = POLLIN };
    SHOW("poll timeout", poll(&pf, 1, 20));
    SHOW("write pipe", write(p[1], "x", 1));
    SHOW("poll ready", poll(&pf, 1, 20));
    printf("revents: %d\n", pf.revents);
    fd_set r;
    FD_ZERO(&r);
    FD_SET(p[0], &r);
    struct timeval tv = { 0, 20000 };
    SHOW("select ready", select(p[0] + 1, &r, NULL, NULL, &tv));
    SHOW("read pipe", read(p[0], buf, sizeof buf));
    FD_ZERO(&r);
    FD_SET(p[0], &r);
    tv.tv_usec = 20000;
    SHOW("select timeout", select(p[0] + 1, &r, NULL, NULL, &tv));
    SHOW("select bad", select(-1, NULL, NULL, NULL, NULL));

    calm_pipe_calls(100);
    /* Files: the variadic open's mode arrives; errors keep errno. */
    char path[512];
    snprintf(path, sizeof path, "%s/call_semantics.%d", dir, (int)getpid());
    umask(022);
    int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0640);
    printf("open created: %d\n", fd >= 0);
    struct stat st;
    fstat(fd, &st);
    printf("mode: %o\n", (unsigned)(st.st_mode & 0777));
    SHOW("pwrite", pwrite(fd, "abc", 3, 10));
    SHOW("fsync", fsync(fd));
    SHOW("fdatasync", fdatasync(fd));
    close(fd);
    SHOW("open missing", open("/nonexistent/file", O_RDONLY));
    SHOW("open again exclusive", open(path, O_CREAT | O_EXCL | O_WRONLY, 0600));
    fd = openat(AT_FDCWD, path, O_RDONLY);
    printf("openat: %d\n", fd >= 0);
    SHOW("pread", pread(fd, buf, 3, 10));
    /* What the file holds, so that runs with and without the shim compare
     * the file written, not only the calls' results. */
    printf("pread data: %.3s\n", buf);
    fstat(fd, &st);
    printf("size: %lld\n", (long long)st.st_size);
    close(fd);
    unlink(path);

    calm_pipe_calls(100);
    /* Sockets. */
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
        return 3;
    SHOW("send", send(sv[0], "ping", 4, 0));
    SHOW("recv", recv(sv[1], buf, sizeof buf, 0));
    SHOW("recv nothing", recv(sv[1], buf, sizeof buf, MSG_DONTWAIT));
    SHOW("sendto", sendto(sv[0], "pong", 4, 0, NULL, 0));
    SHOW("recvfrom", recvfrom(sv[1], buf, sizeof buf, 0, NULL, NULL));
    SHOW("accept on a pair", accept(sv[0], NULL, NULL));
    SHOW("connect bad fd", connect(-1, NULL, 0));

    calm_pipe_calls(100);
    /* Signals. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigprocmask(SIG_BLOCK, &set, NULL);
    kill(getpid(), SIGUSR1);
    int sig = 0;
    SHOW("sigwait", sigwait(&set, &sig));
    printf("signal: %d\n", sig);
    struct timespec short_wait = { 0, 10000000 };
    SHOW("sigtimedwait timeout", sigtimedwait(&set, NULL, &short_wait));
    return 0;
}
