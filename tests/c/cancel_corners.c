/* Thread cancellation in and around interposed calls. Every mode prints
 * what it observed; the shim must change none of it.
 *
 *   cancel_corners create N   N times: create a thread that locks and
 *                             unlocks a mutex in a loop with
 *                             pthread_testcancel, cancel it, join it.
 *   cancel_corners pending    a thread cancels itself (the cancel is then
 *                             pending), initialises 300 fresh mutexes and
 *                             locks and unlocks each (none of these is a
 *                             cancellation point), then calls
 *                             pthread_testcancel. main checks it got that
 *                             far and left no mutex locked.
 *   cancel_corners cond N     N times: a thread locks an error-checking
 *                             mutex, pushes a cleanup handler that unlocks
 *                             it, and waits on a condition nobody signals;
 *                             main cancels it inside the wait. The handler
 *                             must run with the mutex held (unlock 0).
 *   cancel_corners sem N      N times: a thread with a cleanup handler
 *                             blocks in sem_wait; main cancels it.
 *   cancel_corners join N     N times: a thread joins a second thread that
 *                             waits for main; main cancels the joiner inside
 *                             pthread_join, then releases and joins the
 *                             second thread.
 *
 * Output: "<mode> <name> <count>" lines; exit 0. An alarm ends a hang. */
#include "common.h"

#include <semaphore.h>
#include <stdatomic.h>
#include <unistd.h>

#define PENDING_LOCKS 300

static pthread_mutex_t loop_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t fresh[PENDING_LOCKS];
static atomic_int reached_testcancel;

static void *looper(void *arg)
{
    (void)arg;
    for (;;) {
        CHECK(pthread_mutex_lock(&loop_lock));
        CHECK(pthread_mutex_unlock(&loop_lock));
        pthread_testcancel();
    }
    return NULL;
}

static void *pending(void *arg)
{
    (void)arg;
    CHECK(pthread_cancel(pthread_self()));
    for (int i = 0; i < PENDING_LOCKS; i++)
        CHECK(pthread_mutex_init(&fresh[i], NULL));
    for (int i = 0; i < PENDING_LOCKS; i++) {
        CHECK(pthread_mutex_lock(&fresh[i]));
        CHECK(pthread_mutex_unlock(&fresh[i]));
    }
    atomic_store(&reached_testcancel, 1);
    pthread_testcancel();
    return NULL;
}

static pthread_mutex_t cond_lock;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;
static atomic_int cleanup_unlock_ok;
static atomic_int cleanups;

static void unlock_cond_lock(void *arg)
{
    (void)arg;
    /* Error-checking: 0 only if this thread holds it, as POSIX promises
     * after a cancelled condition wait. */
    if (pthread_mutex_unlock(&cond_lock) == 0)
        atomic_fetch_add(&cleanup_unlock_ok, 1);
}

static void *cond_waiter(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&cond_lock));
    pthread_cleanup_push(unlock_cond_lock, NULL);
    for (;;)
        CHECK(pthread_cond_wait(&never, &cond_lock));
    pthread_cleanup_pop(1);
    return NULL;
}

static sem_t empty;

static void count_cleanup(void *arg)
{
    (void)arg;
    atomic_fetch_add(&cleanups, 1);
}

static void *sem_waiter(void *arg)
{
    (void)arg;
    pthread_cleanup_push(count_cleanup, NULL);
    for (;;)
        sem_wait(&empty);
    pthread_cleanup_pop(1);
    return NULL;
}

static sem_t release_second;

static void *second(void *arg)
{
    (void)arg;
    while (sem_wait(&release_second) != 0)
        ;
    return NULL;
}

static void *joiner(void *arg)
{
    pthread_cleanup_push(count_cleanup, NULL);
    CHECK(pthread_join(*(pthread_t *)arg, NULL));
    pthread_cleanup_pop(0);
    return NULL;
}

/* Cancels `t`, joins it, and counts whether it ended cancelled. */
static int cancel_and_join(pthread_t t)
{
    void *ret = NULL;
    CHECK(pthread_cancel(t));
    CHECK(pthread_join(t, &ret));
    return ret == PTHREAD_CANCELED;
}

int main(int argc, char **argv)
{
    alarm(60);
    const char *mode = argc > 1 ? argv[1] : "";
    int n = argc > 2 ? atoi(argv[2]) : 1;
    int canceled = 0;

    if (strcmp(mode, "create") == 0) {
        for (int i = 0; i < n; i++) {
            pthread_t t;
            CHECK(pthread_create(&t, NULL, looper, NULL));
            canceled += cancel_and_join(t);
        }
        printf("create canceled %d\n", canceled);
        return 0;
    }
    if (strcmp(mode, "pending") == 0) {
        pthread_t t;
        void *ret = NULL;
        CHECK(pthread_create(&t, NULL, pending, NULL));
        CHECK(pthread_join(t, &ret));
        int locked = 0;
        for (int i = 0; i < PENDING_LOCKS; i++) {
            if (pthread_mutex_trylock(&fresh[i]) != 0)
                locked++;
            else
                CHECK(pthread_mutex_unlock(&fresh[i]));
        }
        printf("pending canceled %d\n", ret == PTHREAD_CANCELED);
        printf("pending reached-testcancel %d\n", atomic_load(&reached_testcancel));
        printf("pending left-locked %d\n", locked);
        return 0;
    }
    if (strcmp(mode, "cond") == 0) {
        pthread_mutexattr_t attr;
        CHECK(pthread_mutexattr_init(&attr));
        CHECK(pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ERRORCHECK));
        CHECK(pthread_mutex_init(&cond_lock, &attr));
        for (int i = 0; i < n; i++) {
            pthread_t t;
            CHECK(pthread_create(&t, NULL, cond_waiter, NULL));
            /* Every other round, cancel only once the waiter is inside the
             * wait (it released the mutex there); otherwise at once. */
            if (i % 2) {
                for (;;) {
                    CHECK(pthread_mutex_lock(&cond_lock));
                    CHECK(pthread_mutex_unlock(&cond_lock));
                    usleep(100);
                    if (pthread_mutex_trylock(&cond_lock) == 0) {
                        CHECK(pthread_mutex_unlock(&cond_lock));
                        break;
                    }
                }
            }
            canceled += cancel_and_join(t);
            /* The cleanup handler released it: main can take it. */
            CHECK(pthread_mutex_lock(&cond_lock));
            CHECK(pthread_mutex_unlock(&cond_lock));
        }
        printf("cond canceled %d\n", canceled);
        printf("cond cleanup-unlock-ok %d\n", atomic_load(&cleanup_unlock_ok));
        return 0;
    }
    if (strcmp(mode, "sem") == 0) {
        CHECK(sem_init(&empty, 0, 0));
        for (int i = 0; i < n; i++) {
            pthread_t t;
            CHECK(pthread_create(&t, NULL, sem_waiter, NULL));
            if (i % 2)
                usleep(200);
            canceled += cancel_and_join(t);
        }
        printf("sem canceled %d\n", canceled);
        printf("sem cleanups %d\n", atomic_load(&cleanups));
        return 0;
    }
    if (strcmp(mode, "join") == 0) {
        CHECK(sem_init(&release_second, 0, 0));
        for (int i = 0; i < n; i++) {
            pthread_t s, j;
            CHECK(pthread_create(&s, NULL, second, NULL));
            CHECK(pthread_create(&j, NULL, joiner, &s));
            if (i % 2)
                usleep(200);
            canceled += cancel_and_join(j);
            CHECK(sem_post(&release_second));
            CHECK(pthread_join(s, NULL));
        }
        printf("join canceled %d\n", canceled);
        printf("join cleanups %d\n", atomic_load(&cleanups));
        return 0;
    }
    fprintf(stderr, "usage: %s create|pending|cond|sem|join [N]\n", argv[0]);
    return 2;
}
