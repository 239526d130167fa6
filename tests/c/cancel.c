/* Ground truth for threads that never give their locks back normally.
 *
 * 1. cond: a thread locks work_lock W times, then locks cv_lock, pushes a
 *    cleanup handler that unlocks cv_lock, and waits on cv (never
 *    signalled). main makes sure it is waiting (it can lock cv_lock only
 *    once the waiter released it inside pthread_cond_wait), cancels it and
 *    joins it (PTHREAD_CANCELED). main then locks cv_lock again: the
 *    cleanup handler released it.
 * 2. sem: a thread locks work_lock W times, then blocks in sem_wait on a
 *    semaphore of value 0. main waits until the thread is blocked in a
 *    futex wait (/proc/self/task/<tid>/syscall), cancels it and joins it.
 *    Then main posts the semaphore once and takes it with sem_trywait.
 * 3. held: a thread locks held_lock (a normal mutex) and returns while
 *    holding it. main joins it, then pthread_mutex_trylock(held_lock)
 *    returns EBUSY.
 *
 * Output: "pid <pid>", the addresses "work_lock", "cv_lock", "cv", "sem",
 * "held_lock", and "cond-joined canceled|other", "cv-relock 0",
 * "sem-joined canceled|other", "sem-trywait 0", "held-trylock EBUSY|<rc>". */
#include "common.h"

#include <semaphore.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#define W 25

static pthread_mutex_t work_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t cv_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static sem_t sem;
static atomic_int waiting;
static atomic_int sem_tid;
static int never;

static void work(void)
{
    for (int i = 0; i < W; i++) {
        CHECK(pthread_mutex_lock(&work_lock)); /* @work-lock */
        CHECK(pthread_mutex_unlock(&work_lock));
    }
}

static void unlock_cv_lock(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_unlock(&cv_lock)); /* @cleanup-unlock */
}

static void *cond_waiter(void *arg)
{
    (void)arg;
    work();
    CHECK(pthread_mutex_lock(&cv_lock)); /* @waiter-lock */
    pthread_cleanup_push(unlock_cv_lock, NULL);
    atomic_store(&waiting, 1);
    while (!never)
        CHECK(pthread_cond_wait(&cv, &cv_lock)); /* @cond-wait */
    pthread_cleanup_pop(1);
    return NULL;
}

static void *sem_waiter(void *arg)
{
    (void)arg;
    work();
    atomic_store(&sem_tid, (int)syscall(SYS_gettid));
    while (sem_wait(&sem) != 0) /* @sem-wait */
        ;
    return NULL;
}

static void *holder(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&held_lock)); /* @held-lock */
    return NULL; /* still holding held_lock */
}

int main(void)
{
    printf("pid %d\n", (int)getpid());
    printf("work_lock %p\n", (void *)&work_lock);
    printf("cv_lock %p\n", (void *)&cv_lock);
    printf("cv %p\n", (void *)&cv);
    printf("sem %p\n", (void *)&sem);
    printf("held_lock %p\n", (void *)&held_lock);
    fflush(stdout);

    /* 1. cancel a thread blocked in pthread_cond_wait. */
    pthread_t t;
    void *ret;
    CHECK(pthread_create(&t, NULL, cond_waiter, NULL));
    while (!atomic_load(&waiting))
        sleep_ms(1);
    CHECK(pthread_mutex_lock(&cv_lock)); /* @main-cv-lock-1 */
    CHECK(pthread_mutex_unlock(&cv_lock));
    CHECK(pthread_cancel(t));
    CHECK(pthread_join(t, &ret));
    printf("cond-joined %s\n", ret == PTHREAD_CANCELED ? "canceled" : "other");
    printf("cv-relock %d\n", pthread_mutex_lock(&cv_lock)); /* @main-cv-lock-2 */
    CHECK(pthread_mutex_unlock(&cv_lock));

    /* 2. cancel a thread blocked in sem_wait. */
    if (sem_init(&sem, 0, 0) != 0) {
        perror("sem_init");
        return 1;
    }
    CHECK(pthread_create(&t, NULL, sem_waiter, NULL));
    while (!atomic_load(&sem_tid) || !in_futex_wait(atomic_load(&sem_tid)))
        sleep_ms(1);
    CHECK(pthread_cancel(t));
    CHECK(pthread_join(t, &ret));
    printf("sem-joined %s\n", ret == PTHREAD_CANCELED ? "canceled" : "other");
    if (sem_post(&sem) != 0) { /* @sem-post */
        perror("sem_post");
        return 1;
    }
    printf("sem-trywait %d\n", sem_trywait(&sem)); /* @sem-trywait */
    if (sem_destroy(&sem) != 0) {
        perror("sem_destroy");
        return 1;
    }

    /* 3. a thread returns while holding a normal mutex. */
    CHECK(pthread_create(&t, NULL, holder, NULL));
    CHECK(pthread_join(t, NULL));
    int rc = pthread_mutex_trylock(&held_lock); /* @held-trylock */
    if (rc == EBUSY)
        printf("held-trylock EBUSY\n");
    else
        printf("held-trylock %d\n", rc);
    fflush(stdout);
    return 0;
}
