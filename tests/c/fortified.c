/* Built with -O2 -D_FORTIFY_SOURCE=2 (as Debian builds its packages): its
 * poll and read into a known buffer compile to __poll_chk and __read_chk.
 * A writer thread makes each wait about 100 ms; the program measures both.
 *
 * Prints "poll_ns N", "read_ns N", "got xy". */
#include "common.h"

#include <poll.h>

static int fds[2];

static void *writer(void *arg)
{
    (void)arg;
    sleep_ms(100);
    if (write(fds[1], "x", 1) != 1)
        exit(3);
    sleep_ms(100);
    if (write(fds[1], "y", 1) != 1)
        exit(3);
    return NULL;
}

int main(int argc, char **argv)
{
    (void)argv;
    if (pipe(fds) != 0)
        return 2;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, writer, NULL));
    struct pollfd wait_for[2] = {{.fd = fds[0], .events = POLLIN}};
    nfds_t n = (nfds_t)argc; /* 1: not a constant, so the check is kept */
    long long started = now_ns();
    if (poll(wait_for, n, -1) != 1)
        return 3;
    printf("poll_ns %lld\n", now_ns() - started);
    char buf[8];
    size_t want = (size_t)argc; /* 1 byte at a time, size unknown to the compiler */
    char got[3] = {0};
    if (read(fds[0], buf, want) != 1)
        return 3;
    got[0] = buf[0];
    started = now_ns();
    if (read(fds[0], buf, want) != 1)
        return 3;
    printf("read_ns %lld\n", now_ns() - started);
    got[1] = buf[0];
    CHECK(pthread_join(t, NULL));
    printf("got %s\n", got);
    return 0;
}
