/* Ground truth for PTHREAD_PROCESS_SHARED locks in shared memory.
 *
 * Before fork, main maps a MAP_SHARED|MAP_ANONYMOUS page holding a mutex, a
 * rwlock and a semaphore, all initialised PTHREAD_PROCESS_SHARED (pshared
 * = 1 for the semaphore). Then it forks:
 *   child:  locks the mutex C times, write-locks the rwlock CW times,
 *           sem_waits SEM times, exits 0;
 *   parent: locks the mutex P times, read-locks the rwlock PR times,
 *           sem_posts SEM times, waits for the child, exits 0.
 * Each process is single-threaded.
 *
 * Output: "parent <pid>", "mutex <addr>", "rwlock <addr>", "sem <addr>",
 * then "child <pid>", "child-status 0". */
#include "common.h"

#include <semaphore.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define P 140
#define C 90
#define PR 60
#define CW 30
#define SEM 17

struct shared {
    pthread_mutex_t mutex;
    pthread_rwlock_t rwlock;
    sem_t sem;
    long counter;
};

int main(void)
{
    struct shared *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    pthread_mutexattr_t ma;
    CHECK(pthread_mutexattr_init(&ma));
    CHECK(pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED));
    CHECK(pthread_mutex_init(&s->mutex, &ma)); /* @mutex-init */
    CHECK(pthread_mutexattr_destroy(&ma));
    pthread_rwlockattr_t ra;
    CHECK(pthread_rwlockattr_init(&ra));
    CHECK(pthread_rwlockattr_setpshared(&ra, PTHREAD_PROCESS_SHARED));
    CHECK(pthread_rwlock_init(&s->rwlock, &ra));
    CHECK(pthread_rwlockattr_destroy(&ra));
    if (sem_init(&s->sem, 1, 0) != 0) {
        perror("sem_init");
        return 1;
    }

    printf("parent %d\n", (int)getpid());
    printf("mutex %p\n", (void *)&s->mutex);
    printf("rwlock %p\n", (void *)&s->rwlock);
    printf("sem %p\n", (void *)&s->sem);
    fflush(stdout);

    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        for (int i = 0; i < C; i++) {
            CHECK(pthread_mutex_lock(&s->mutex)); /* @child-lock */
            s->counter++;
            CHECK(pthread_mutex_unlock(&s->mutex));
        }
        for (int i = 0; i < CW; i++) {
            CHECK(pthread_rwlock_wrlock(&s->rwlock)); /* @child-wrlock */
            CHECK(pthread_rwlock_unlock(&s->rwlock));
        }
        for (int i = 0; i < SEM; i++)
            while (sem_wait(&s->sem) != 0) /* @child-sem-wait */
                ;
        exit(0);
    }
    for (int i = 0; i < P; i++) {
        CHECK(pthread_mutex_lock(&s->mutex)); /* @parent-lock */
        s->counter++;
        CHECK(pthread_mutex_unlock(&s->mutex));
    }
    for (int i = 0; i < PR; i++) {
        CHECK(pthread_rwlock_rdlock(&s->rwlock)); /* @parent-rdlock */
        CHECK(pthread_rwlock_unlock(&s->rwlock));
    }
    for (int i = 0; i < SEM; i++)
        if (sem_post(&s->sem) != 0) { /* @parent-sem-post */
            perror("sem_post");
            return 1;
        }
    printf("child %d\n", (int)pid);
    int status;
    if (waitpid(pid, &status, 0) != pid) {
        perror("waitpid");
        return 1;
    }
    printf("child-status %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    printf("counter %ld\n", s->counter);
    fflush(stdout);
    return 0;
}
