/* A process-shared mutex taken 100 times at one line, then made a robust
 * mutex by another process (which initialises it again and dies holding
 * it), and taken again at the same line: the shim saw no init of its own,
 * so only the mutex's kind, read at each call, says it must not be tried
 * first (glibc's trylock of an orphaned robust mutex would leave it locked
 * in a state its lock then waits on).
 *
 * Output: "lock <rc>" for each of the five locks after the change (130,
 * EOWNERDEAD, then 131, ENOTRECOVERABLE, as the first is unlocked without
 * pthread_mutex_consistent), then "done". An alarm ends a program that
 * hangs. */
#include "common.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
    alarm(20);
    pthread_mutex_t *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return 1;
    pthread_mutexattr_t attr;
    CHECK(pthread_mutexattr_init(&attr));
    CHECK(pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED));
    CHECK(pthread_mutex_init(m, &attr));
    for (int i = 0; i < 105; i++) {
        if (i == 100) {
            pid_t child = fork();
            if (child < 0)
                return 1;
            if (child == 0) {
                pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
                pthread_mutex_init(m, &attr);
                pthread_mutex_lock(m);
                _exit(0); /* dies holding it */
            }
            CHECK(waitpid(child, NULL, 0) == child ? 0 : 1);
        }
        int rc = pthread_mutex_lock(m); /* @one-line */
        if (i >= 100)
            printf("lock %d\n", rc);
        if (rc == 0 || i == 100)
            CHECK(pthread_mutex_unlock(m));
    }
    printf("done\n");
    return 0;
}
