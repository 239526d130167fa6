/* The shim must not change what pthread calls return.
 *
 * Each check prints "<name> <CODE>" where CODE is the symbolic return value
 * (or the errno value for the errno check). A check that does not get what
 * glibc is specified to return also prints a FAIL line; the program exits 0
 * only if every check passed. The output does not depend on timing, so it
 * can be compared byte for byte between a plain run and a run under the shim. */
#include "common.h"

#include <sched.h>
#include <stdatomic.h>
#include <unistd.h>

static int failures;

static const char *code_name(int rc)
{
    static char buf[32];
    switch (rc) {
    case 0: return "0";
    case EBUSY: return "EBUSY";
    case ETIMEDOUT: return "ETIMEDOUT";
    case EDEADLK: return "EDEADLK";
    case EPERM: return "EPERM";
    case EINVAL: return "EINVAL";
    case EAGAIN: return "EAGAIN";
    case EOWNERDEAD: return "EOWNERDEAD";
    case ENOTRECOVERABLE: return "ENOTRECOVERABLE";
    case EINTR: return "EINTR";
    default:
        snprintf(buf, sizeof buf, "E%d", rc);
        return buf;
    }
}

static void report(const char *check, int got, int want)
{
    printf("%-32s %s\n", check, code_name(got));
    if (got != want) {
        printf("FAIL %s: expected %s\n", check, code_name(want));
        failures++;
    }
}

/* A deadline ms milliseconds from now on CLOCK_REALTIME. */
static struct timespec deadline_in_ms(long ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (ms % 1000) * 1000000L;
    ts.tv_sec += ms / 1000 + ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    return ts;
}

/* ---- a helper thread that holds a mutex until told to let go ---- */

struct holder {
    pthread_t thread;
    pthread_mutex_t *mutex;
    int exit_holding;      /* 1: exit without unlocking (robust test) */
    atomic_int holding;
    atomic_int release;
    int lock_rc, unlock_rc;
};

static void *holder_main(void *arg)
{
    struct holder *h = arg;
    h->lock_rc = pthread_mutex_lock(h->mutex);
    atomic_store(&h->holding, 1);
    if (h->exit_holding)
        return NULL;
    while (!atomic_load(&h->release))
        sched_yield();
    h->unlock_rc = pthread_mutex_unlock(h->mutex);
    return NULL;
}

static void holder_start(struct holder *h, pthread_mutex_t *m, int exit_holding)
{
    memset(h, 0, sizeof *h);
    h->mutex = m;
    h->exit_holding = exit_holding;
    CHECK(pthread_create(&h->thread, NULL, holder_main, h));
    while (!atomic_load(&h->holding))
        sched_yield();
}

static void holder_finish(struct holder *h)
{
    atomic_store(&h->release, 1);
    CHECK(pthread_join(h->thread, NULL));
    CHECK(h->lock_rc);
    if (!h->exit_holding)
        CHECK(h->unlock_rc);
}

/* ---- a helper thread that trylocks a mutex once ---- */

static pthread_mutex_t *try_target;
static int try_rc;

static void *try_main(void *arg)
{
    (void)arg;
    try_rc = pthread_mutex_trylock(try_target);
    if (try_rc == 0)
        CHECK(pthread_mutex_unlock(try_target));
    return NULL;
}

static int trylock_from_other_thread(pthread_mutex_t *m)
{
    pthread_t t;
    try_target = m;
    CHECK(pthread_create(&t, NULL, try_main, NULL));
    CHECK(pthread_join(t, NULL));
    return try_rc;
}

/* ---- the checks ---- */

static void check_normal_mutex(void)
{
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    struct holder h;

    report("trylock-free", pthread_mutex_trylock(&m), 0);
    report("unlock-after-trylock", pthread_mutex_unlock(&m), 0);

    holder_start(&h, &m, 0);
    report("trylock-held-by-other", pthread_mutex_trylock(&m), EBUSY);
    struct timespec dl = deadline_in_ms(20);
    report("timedlock-held-by-other", pthread_mutex_timedlock(&m, &dl), ETIMEDOUT);
    report("destroy-locked", pthread_mutex_destroy(&m), EBUSY);
    holder_finish(&h);

    dl = deadline_in_ms(1000);
    report("timedlock-free", pthread_mutex_timedlock(&m, &dl), 0);
    report("unlock-after-timedlock", pthread_mutex_unlock(&m), 0);
    report("destroy-unlocked", pthread_mutex_destroy(&m), 0);
}

static void check_errorcheck_mutex(void)
{
    pthread_mutexattr_t attr;
    pthread_mutex_t m;
    struct holder h;

    CHECK(pthread_mutexattr_init(&attr));
    CHECK(pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ERRORCHECK));
    CHECK(pthread_mutex_init(&m, &attr));
    CHECK(pthread_mutexattr_destroy(&attr));

    report("errorcheck-lock", pthread_mutex_lock(&m), 0);
    report("errorcheck-relock", pthread_mutex_lock(&m), EDEADLK);
    report("errorcheck-unlock", pthread_mutex_unlock(&m), 0);
    report("errorcheck-unlock-unlocked", pthread_mutex_unlock(&m), EPERM);

    holder_start(&h, &m, 0);
    report("errorcheck-unlock-others", pthread_mutex_unlock(&m), EPERM);
    holder_finish(&h);

    CHECK(pthread_mutex_destroy(&m));
}

static void check_recursive_mutex(void)
{
    pthread_mutexattr_t attr;
    pthread_mutex_t m;

    CHECK(pthread_mutexattr_init(&attr));
    CHECK(pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE));
    CHECK(pthread_mutex_init(&m, &attr));
    CHECK(pthread_mutexattr_destroy(&attr));

    report("recursive-lock-1", pthread_mutex_lock(&m), 0);
    report("recursive-lock-2", pthread_mutex_lock(&m), 0);
    report("recursive-lock-3", pthread_mutex_lock(&m), 0);
    report("recursive-other-trylock-held", trylock_from_other_thread(&m), EBUSY);
    report("recursive-unlock-3", pthread_mutex_unlock(&m), 0);
    report("recursive-unlock-2", pthread_mutex_unlock(&m), 0);
    report("recursive-unlock-1", pthread_mutex_unlock(&m), 0);
    report("recursive-unlock-extra", pthread_mutex_unlock(&m), EPERM);
    report("recursive-other-trylock-free", trylock_from_other_thread(&m), 0);
    report("recursive-trylock", pthread_mutex_trylock(&m), 0);
    report("recursive-trylock-unlock", pthread_mutex_unlock(&m), 0);

    CHECK(pthread_mutex_destroy(&m));
}

static void check_robust_mutex(void)
{
    pthread_mutexattr_t attr;
    pthread_mutex_t m;
    struct holder h;

    CHECK(pthread_mutexattr_init(&attr));
    CHECK(pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST));
    CHECK(pthread_mutex_init(&m, &attr));
    CHECK(pthread_mutexattr_destroy(&attr));

    holder_start(&h, &m, 1); /* the holder exits while holding m */
    holder_finish(&h);
    report("robust-lock-owner-died", pthread_mutex_lock(&m), EOWNERDEAD);
    report("robust-consistent", pthread_mutex_consistent(&m), 0);
    report("robust-unlock", pthread_mutex_unlock(&m), 0);
    report("robust-relock", pthread_mutex_lock(&m), 0);
    report("robust-unlock-again", pthread_mutex_unlock(&m), 0);

    CHECK(pthread_mutex_destroy(&m));
}

static void check_errno_preserved(void)
{
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    errno = 4242;
    int rc1 = pthread_mutex_lock(&m);
    int rc2 = pthread_mutex_unlock(&m);
    int saved = errno;
    CHECK(rc1);
    CHECK(rc2);
    printf("%-32s %d\n", "errno-after-lock-unlock", saved);
    if (saved != 4242) {
        printf("FAIL errno-after-lock-unlock: expected 4242\n");
        failures++;
    }
}

static void check_cond_timedwait(void)
{
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t c = PTHREAD_COND_INITIALIZER;
    struct timespec dl = deadline_in_ms(20);
    int rc;

    CHECK(pthread_mutex_lock(&m));
    do /* nobody signals c, but spurious wake-ups are allowed */
        rc = pthread_cond_timedwait(&c, &m, &dl);
    while (rc == 0);
    report("cond-timedwait", rc, ETIMEDOUT);
    /* The mutex is held again after the timed-out wait. */
    report("cond-timedwait-mutex-held", trylock_from_other_thread(&m), EBUSY);
    report("cond-timedwait-unlock", pthread_mutex_unlock(&m), 0);
    CHECK(pthread_cond_destroy(&c));
    CHECK(pthread_mutex_destroy(&m));
}

int main(void)
{
    check_normal_mutex();
    check_errorcheck_mutex();
    check_recursive_mutex();
    check_robust_mutex();
    check_errno_preserved();
    check_cond_timedwait();
    printf("failures %d\n", failures);
    return failures == 0 ? 0 : 1;
}
