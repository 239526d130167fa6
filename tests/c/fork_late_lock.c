/* A fork child that waits before its first lock: its trace must start at
 * the fork all the same (the child's first recorded call starts it from
 * the time the fork was noted), so its duration covers the wait.
 *
 * The parent takes its lock (so the shim chose its handlers), forks, and
 * waits for the child. The child sleeps WAIT_MS (argv[1], default 300),
 * takes lock B USES times, and prints "child <pid>" and "waited_ns <n>",
 * the wait as it measured it from the fork's return. */
#include "common.h"
#include <sys/wait.h>

#define USES 100

static pthread_mutex_t lock_a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t lock_b = PTHREAD_MUTEX_INITIALIZER;

int main(int argc, char **argv)
{
    long wait_ms = argc > 1 ? atol(argv[1]) : 300;
    CHECK(pthread_mutex_lock(&lock_a));
    CHECK(pthread_mutex_unlock(&lock_a));
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        long long forked = now_ns();
        struct timespec nap = {wait_ms / 1000, (wait_ms % 1000) * 1000000L};
        while (nanosleep(&nap, &nap) != 0)
            ;
        long long waited = now_ns() - forked;
        for (int i = 0; i < USES; i++) {
            CHECK(pthread_mutex_lock(&lock_b));
            CHECK(pthread_mutex_unlock(&lock_b));
        }
        printf("child %d\nwaited_ns %lld\n", (int)getpid(), waited);
        fflush(stdout);
        exit(0);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "child failed\n");
        return 1;
    }
    return 0;
}
