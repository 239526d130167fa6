/* A fork loop, as glibc's tst-robust-fork and every forking server make:
 * the parent forks N children one at a time and waits for each. The child
 * _exits at once, or with "lock" first takes and releases one mutex (so,
 * under the shim, it records something and makes a trace of its own).
 * Prints the CPU time per fork in microseconds: the parent's and the
 * children's together, user and system (getrusage), which the machine's
 * other load does not lengthen as it does wall time.
 *
 *   fork [N] [lock]
 *
 * Run with and without the shim by scripts/bench.sh. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static double cpu_us(int who)
{
    struct rusage ru;
    getrusage(who, &ru);
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 + ru.ru_utime.tv_usec +
           ru.ru_stime.tv_usec;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 2000;
    int child_locks = argc > 2 && strcmp(argv[2], "lock") == 0;
    /* The parent has used the lock: a child's lock is one it inherited. */
    pthread_mutex_lock(&lock);
    pthread_mutex_unlock(&lock);
    double before = cpu_us(RUSAGE_SELF) + cpu_us(RUSAGE_CHILDREN);
    for (long i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 1;
        }
        if (pid == 0) {
            if (child_locks) {
                pthread_mutex_lock(&lock);
                pthread_mutex_unlock(&lock);
            }
            _exit(0);
        }
        int status;
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "fork: child %d failed (status 0x%x)\n", (int)pid, status);
            return 1;
        }
    }
    double after = cpu_us(RUSAGE_SELF) + cpu_us(RUSAGE_CHILDREN);
    printf("%.1f\n", (after - before) / (double)n);
    return 0;
}
