/* Locks used against their rules, one way per mode; nothing here hangs or
 * crashes with glibc, so the same run goes with and without the shim.
 *
 *   misuse unlock-unlocked   a mutex one thread takes 2000 times, then
 *                            unlocks once more (@extra-unlock).
 *   misuse unlock-not-owner  main locks m; a thread unlocks it (@foreign).
 *   misuse destroy-held      main destroys a mutex it holds (EBUSY,
 *                            @destroy-mutex) and a read-locked rwlock
 *                            (@destroy-rwlock).
 *   misuse wait-unheld       a timed condition wait with a mutex nobody
 *                            holds (@wait-unheld).
 *   misuse two-mutexes       two threads wait on one condition at once,
 *                            one with m1 (@wait-m1), one with m2 (@wait-m2).
 *   misuse two-in-turn       the same waits one after the other: allowed.
 *   misuse destroy-blocked   main destroys a condition a thread is blocked
 *                            on (@destroy-cond); the thread's timed wait
 *                            ends it.
 *   misuse destroy-woken     main broadcasts, then destroys the condition
 *                            while the woken waiter waits for the mutex:
 *                            allowed.
 *   misuse relock            an error-checking mutex locked twice by its
 *                            holder (@relock): EDEADLK.
 *   misuse none              the same objects, used by the rules.
 *
 * Output: "mode <mode>", then what each call returned. */
#include "common.h"

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t m1 = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t m2 = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static int waiting1, waiting2, go;

static void deadline_in(struct timespec *ts, long ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_nsec += (ms % 1000) * 1000000L;
    ts->tv_sec += ms / 1000 + ts->tv_nsec / 1000000000L;
    ts->tv_nsec %= 1000000000L;
}

static void *unlock_foreign(void *arg)
{
    (void)arg;
    printf("foreign-unlock %d\n", pthread_mutex_unlock(&m)); /* @foreign */
    return NULL;
}

static void *wait_with_m1(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&m1));
    waiting1 = 1;
    while (!go)
        CHECK(pthread_cond_wait(&c, &m1)); /* @wait-m1 */
    CHECK(pthread_mutex_unlock(&m1));
    return NULL;
}

static void *wait_with_m2(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&m2));
    waiting2 = 1;
    while (!go)
        CHECK(pthread_cond_wait(&c, &m2)); /* @wait-m2 */
    CHECK(pthread_mutex_unlock(&m2));
    return NULL;
}

/* Until `*flag` is set under `mutex`: once it is, the thread that set it
 * waits on the condition (it released the mutex by waiting). */
static void until_waiting(pthread_mutex_t *mutex, int *flag)
{
    for (;;) {
        CHECK(pthread_mutex_lock(mutex));
        int set = *flag;
        CHECK(pthread_mutex_unlock(mutex));
        if (set)
            return;
        sleep_ms(1);
    }
}

static void wake(pthread_mutex_t *mutex)
{
    CHECK(pthread_mutex_lock(mutex));
    go = 1;
    CHECK(pthread_cond_broadcast(&c));
    CHECK(pthread_mutex_unlock(mutex));
}

static void *timed_waiter(void *arg)
{
    (void)arg;
    struct timespec ts;
    deadline_in(&ts, 300);
    CHECK(pthread_mutex_lock(&m1));
    waiting1 = 1;
    int rc = 0;
    while (!go && rc == 0)
        rc = pthread_cond_timedwait(&c, &m1, &ts);
    CHECK(pthread_mutex_unlock(&m1));
    printf("timed-wait %s\n", rc == ETIMEDOUT ? "ETIMEDOUT" : rc == 0 ? "0" : "error");
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "none";
    printf("mode %s\n", mode);
    pthread_t t1, t2;
    if (!strcmp(mode, "unlock-unlocked")) {
        for (int i = 0; i < 2000; i++) {
            CHECK(pthread_mutex_lock(&m));
            CHECK(pthread_mutex_unlock(&m));
        }
        printf("extra-unlock %d\n", pthread_mutex_unlock(&m)); /* @extra-unlock */
    } else if (!strcmp(mode, "unlock-not-owner")) {
        CHECK(pthread_mutex_lock(&m));
        CHECK(pthread_create(&t1, NULL, unlock_foreign, NULL));
        CHECK(pthread_join(t1, NULL));
    } else if (!strcmp(mode, "destroy-held")) {
        CHECK(pthread_mutex_lock(&m));
        printf("destroy-mutex %s\n", pthread_mutex_destroy(&m) == EBUSY ? "EBUSY" : "other"); /* @destroy-mutex */
        CHECK(pthread_mutex_unlock(&m));
        CHECK(pthread_mutex_destroy(&m));
        CHECK(pthread_rwlock_rdlock(&rw));
        printf("destroy-rwlock %d\n", pthread_rwlock_destroy(&rw)); /* @destroy-rwlock */
        CHECK(pthread_rwlock_unlock(&rw));
    } else if (!strcmp(mode, "wait-unheld")) {
        struct timespec ts;
        deadline_in(&ts, 10);
        int rc = pthread_cond_timedwait(&c, &m, &ts); /* @wait-unheld */
        printf("wait-unheld %s\n", rc == ETIMEDOUT ? "ETIMEDOUT" : "other");
        CHECK(pthread_mutex_unlock(&m));
    } else if (!strcmp(mode, "two-mutexes") || !strcmp(mode, "two-in-turn")) {
        int together = !strcmp(mode, "two-mutexes");
        CHECK(pthread_create(&t1, NULL, wait_with_m1, NULL));
        until_waiting(&m1, &waiting1);
        if (!together) {
            wake(&m1);
            CHECK(pthread_join(t1, NULL));
            go = 0;
        }
        CHECK(pthread_create(&t2, NULL, wait_with_m2, NULL));
        until_waiting(&m2, &waiting2);
        wake(&m2);
        if (together) {
            wake(&m1);
            CHECK(pthread_join(t1, NULL));
        }
        CHECK(pthread_join(t2, NULL));
    } else if (!strcmp(mode, "destroy-blocked")) {
        CHECK(pthread_create(&t1, NULL, timed_waiter, NULL));
        until_waiting(&m1, &waiting1);
        CHECK(pthread_cond_destroy(&c)); /* @destroy-cond */
        CHECK(pthread_join(t1, NULL));
    } else if (!strcmp(mode, "destroy-woken")) {
        CHECK(pthread_create(&t1, NULL, timed_waiter, NULL));
        until_waiting(&m1, &waiting1);
        CHECK(pthread_mutex_lock(&m1));
        go = 1;
        CHECK(pthread_cond_broadcast(&c));
        CHECK(pthread_cond_destroy(&c)); /* @destroy-woken */
        CHECK(pthread_mutex_unlock(&m1));
        CHECK(pthread_join(t1, NULL));
    } else if (!strcmp(mode, "relock")) {
        pthread_mutexattr_t attr;
        pthread_mutex_t ec;
        CHECK(pthread_mutexattr_init(&attr));
        CHECK(pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ERRORCHECK));
        CHECK(pthread_mutex_init(&ec, &attr));
        CHECK(pthread_mutex_lock(&ec));
        printf("relock %s\n", pthread_mutex_lock(&ec) == EDEADLK ? "EDEADLK" : "other"); /* @relock */
        CHECK(pthread_mutex_unlock(&ec));
        CHECK(pthread_mutex_destroy(&ec));
    } else if (!strcmp(mode, "none")) {
        for (int i = 0; i < 2000; i++) {
            CHECK(pthread_mutex_lock(&m));
            CHECK(pthread_mutex_unlock(&m));
        }
        CHECK(pthread_rwlock_rdlock(&rw));
        CHECK(pthread_rwlock_unlock(&rw));
        CHECK(pthread_rwlock_destroy(&rw));
        CHECK(pthread_create(&t1, NULL, wait_with_m1, NULL));
        until_waiting(&m1, &waiting1);
        wake(&m1);
        CHECK(pthread_join(t1, NULL));
        CHECK(pthread_cond_destroy(&c));
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    return 0;
}
