/* Every reason a wait can end for, each forced on an object of its own and
 * checked by the program itself (it exits 3 if the C library did not give
 * the expected result):
 *
 *   waited     acquired after waiting (main holds it while a thread waits)
 *   timed      timed out (a timedlock while a helper holds it)
 *   robust     owner died (its owner exits holding it)
 *   checked    deadlock refused (an error-checking mutex relocked)
 *   empty      interrupted (sem_wait, SIGALRM without SA_RESTART)
 *   cv         notified by a signal, then by a broadcast
 *   cv_cancel  cancelled (a thread cancelled in the wait)
 *   tried      try-failed (a trylock while main holds it)
 *
 * Arguments: none. */
#include "common.h"
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/time.h>

static pthread_mutex_t waited = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t timed = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t robust, checked;
static pthread_mutex_t tried = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t cv_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t cancel_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t cv_cancel = PTHREAD_COND_INITIALIZER;
static sem_t empty;
static atomic_int tid_of_waiter, tid_of_cv_waiter, tid_of_cancelled, helper_holds;
static int turn;

static void expect(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "unexpected: %s\n", what);
        exit(3);
    }
}

static void *waiter(void *arg)
{
    (void)arg;
    atomic_store(&tid_of_waiter, gettid_now());
    CHECK(pthread_mutex_lock(&waited)); /* marker: acquired after wait */
    CHECK(pthread_mutex_unlock(&waited));
    return NULL;
}

static void *timed_holder(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&timed));
    atomic_store(&helper_holds, 1);
    sleep_ms(60);
    CHECK(pthread_mutex_unlock(&timed));
    return NULL;
}

static void *robust_owner(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&robust));
    return NULL; /* exits holding it */
}

static void *cv_waiter(void *arg)
{
    (void)arg;
    atomic_store(&tid_of_cv_waiter, gettid_now());
    CHECK(pthread_mutex_lock(&cv_mutex));
    while (turn < 1)
        CHECK(pthread_cond_wait(&cv, &cv_mutex)); /* marker: cv wait */
    while (turn < 2)
        CHECK(pthread_cond_wait(&cv, &cv_mutex));
    CHECK(pthread_mutex_unlock(&cv_mutex));
    return NULL;
}

static void unlock_on_cancel(void *m)
{
    pthread_mutex_unlock(m);
}

static void *cancelled(void *arg)
{
    (void)arg;
    atomic_store(&tid_of_cancelled, gettid_now());
    CHECK(pthread_mutex_lock(&cancel_mutex));
    pthread_cleanup_push(unlock_on_cancel, &cancel_mutex);
    for (;;)
        pthread_cond_wait(&cv_cancel, &cancel_mutex);
    pthread_cleanup_pop(1);
    return NULL;
}

static void wait_blocked(atomic_int *tid)
{
    while (atomic_load(tid) == 0 || !in_futex_wait(atomic_load(tid)))
        sleep_ms(1);
}

static void on_alarm(int sig)
{
    (void)sig;
}

int main(void)
{
    pthread_t t;

    /* Acquired after waiting. */
    CHECK(pthread_mutex_lock(&waited));
    CHECK(pthread_create(&t, NULL, waiter, NULL));
    wait_blocked(&tid_of_waiter);
    CHECK(pthread_mutex_unlock(&waited));
    CHECK(pthread_join(t, NULL));

    /* Timed out. */
    CHECK(pthread_create(&t, NULL, timed_holder, NULL));
    while (!atomic_load(&helper_holds))
        sleep_ms(1);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_nsec += 10000000;
    if (deadline.tv_nsec >= 1000000000) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000;
    }
    expect(pthread_mutex_timedlock(&timed, &deadline) == ETIMEDOUT, "timedlock timed out");
    CHECK(pthread_join(t, NULL));

    /* Owner died. */
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    CHECK(pthread_mutex_init(&robust, &attr));
    CHECK(pthread_create(&t, NULL, robust_owner, NULL));
    CHECK(pthread_join(t, NULL));
    expect(pthread_mutex_lock(&robust) == EOWNERDEAD, "robust lock: owner died");
    CHECK(pthread_mutex_consistent(&robust));
    CHECK(pthread_mutex_unlock(&robust));

    /* Deadlock refused. */
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ERRORCHECK);
    CHECK(pthread_mutex_init(&checked, &attr));
    CHECK(pthread_mutex_lock(&checked));
    expect(pthread_mutex_lock(&checked) == EDEADLK, "error-checking relock refused");
    CHECK(pthread_mutex_unlock(&checked));

    /* Interrupted. */
    CHECK(sem_init(&empty, 0, 0));
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = { { 0, 0 }, { 0, 20000 } };
    setitimer(ITIMER_REAL, &it, NULL);
    expect(sem_wait(&empty) == -1 && errno == EINTR, "sem_wait interrupted");

    /* Notified by a signal, then by a broadcast. */
    CHECK(pthread_create(&t, NULL, cv_waiter, NULL));
    for (int round = 1; round <= 2; round++) {
        wait_blocked(&tid_of_cv_waiter);
        CHECK(pthread_mutex_lock(&cv_mutex));
        turn = round;
        if (round == 1)
            CHECK(pthread_cond_signal(&cv));
        else
            CHECK(pthread_cond_broadcast(&cv));
        CHECK(pthread_mutex_unlock(&cv_mutex));
        sleep_ms(5);
    }
    CHECK(pthread_join(t, NULL));

    /* Cancelled. */
    CHECK(pthread_create(&t, NULL, cancelled, NULL));
    wait_blocked(&tid_of_cancelled);
    CHECK(pthread_cancel(t));
    void *result;
    CHECK(pthread_join(t, &result));
    expect(result == PTHREAD_CANCELED, "cancelled");

    /* Try-failed. */
    CHECK(pthread_mutex_lock(&tried));
    pthread_t other;
    CHECK(pthread_create(&other, NULL, (void *(*)(void *))pthread_mutex_trylock, &tried));
    void *rc;
    CHECK(pthread_join(other, &rc));
    expect((long)rc == EBUSY, "trylock found it taken");
    CHECK(pthread_mutex_unlock(&tried));

    puts("forced every reason");
    return 0;
}
