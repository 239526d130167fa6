/* Locks the shim first sees through a read-only view: a mutex and an
 * rwlock in a shared memfd page, never initialised by an init call (zero
 * bytes are their static initialisers; a spinlock has none), held by a child
 * through a writable mapping, then tried by the parent through a PROT_READ
 * mapping of the same page. glibc's trylocks only read a held lock and
 * return EBUSY; a profiler that wrote to the lock (even the value it held)
 * would kill the parent with SIGSEGV. Run with and without the shim: the
 * output must be the same.
 *
 * Output: "mutex-trylock 16", "rwlock-tryrdlock 16", "rwlock-trywrlock 16",
 * then "done". Exits 0. */
#define _GNU_SOURCE
#include "common.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

struct shared {
    pthread_mutex_t mutex;
    pthread_rwlock_t rwlock;
    int ready;
};

int main(void)
{
    int fd = memfd_create("locksuit-readonly-view", 0);
    if (fd < 0 || ftruncate(fd, 4096) != 0)
        return 2;
    struct shared *rw = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const struct shared *ro = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
    if (rw == MAP_FAILED || ro == MAP_FAILED)
        return 2;
    /* Zero bytes: both locks as their static initialisers leave them. A
     * trylock needs nothing more across processes; nobody here waits. */
    pid_t child = fork();
    if (child == 0) {
        pthread_mutex_lock(&rw->mutex);
        pthread_rwlock_wrlock(&rw->rwlock);
        __atomic_store_n(&rw->ready, 1, __ATOMIC_RELEASE);
        pause();
        _exit(0);
    }
    while (!__atomic_load_n(&ro->ready, __ATOMIC_ACQUIRE))
        usleep(1000);
    printf("mutex-trylock %d\n", pthread_mutex_trylock((pthread_mutex_t *)&ro->mutex));
    printf("rwlock-tryrdlock %d\n", pthread_rwlock_tryrdlock((pthread_rwlock_t *)&ro->rwlock));
    printf("rwlock-trywrlock %d\n", pthread_rwlock_trywrlock((pthread_rwlock_t *)&ro->rwlock));
    fflush(stdout);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    puts("done");
    return 0;
}
