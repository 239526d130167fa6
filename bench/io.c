/* 4 KiB writes and reads that never block: through a pipe (write, then
 * read it back) or to a file in the page cache (pwrite, then pread), on one
 * thread, timed with CLOCK_MONOTONIC. Prints nanoseconds per call. Run
 * with and without the shim by scripts/bench.sh: the shim times each call
 * and records none (none blocks for LOCKSUIT_BLOCK_MIN_US).
 *
 *   io pipe|file [CALLS] [DIR]    DIR: where the file goes (default /tmp) */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int use_pipe = argc > 1 && !strcmp(argv[1], "pipe");
    long calls = argc > 2 ? atol(argv[2]) : 1000000L;
    const char *dir = argc > 3 ? argv[3] : "/tmp";
    static char buf[4096];
    int fds[2];
    if (use_pipe) {
        if (pipe(fds)) { perror("pipe"); return 1; }
    } else {
        char path[4096];
        snprintf(path, sizeof path, "%s/locksuit-bench-io.%d", dir, (int)getpid());
        fds[0] = fds[1] = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
        if (fds[0] < 0) { perror(path); return 1; }
        unlink(path);
    }
    struct timespec a, b;
    for (long i = -1000; i < calls / 2; i++) {
        if (i == 0)
            clock_gettime(CLOCK_MONOTONIC, &a);
        ssize_t w = use_pipe ? write(fds[1], buf, sizeof buf) : pwrite(fds[1], buf, sizeof buf, 0);
        ssize_t r = use_pipe ? read(fds[0], buf, sizeof buf) : pread(fds[0], buf, sizeof buf, 0);
        if (w != (ssize_t)sizeof buf || r != (ssize_t)sizeof buf) { perror("io"); return 1; }
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
    printf("%.1f\n", ns / (calls / 2 * 2));
    return 0;
}
