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
 *   misuse relock-rw         an rwlock held for writing, read-locked again by
 *                            its holder (@relock-rw): EDEADLK.
 *   misuse two-lines         two unlocks of an unlocked mutex, at two lines
 *                            (@twice-a, @twice-b): two findings.
 *   misuse never-locked      an unlock of a static mutex never locked
 *                            (@never-locked).
 *   misuse unmapped          an rwlock in a mapping the program unmaps, then
 *                            destroys (glibc's destroy reads nothing): the
 *                            program must run as without the shim.
 *   misuse none              the same objects, used by the rules.
 *   misuse deep              40 mutexes held nested (deeper than the shim
 *                            tracks), released in order: no misuse.
 *   misuse recursive         a recursive mutex locked three times, unlocked
 *                            three times: no misuse.
 *   misuse atfork            pthread_atfork handlers lock in prepare and
 *                            unlock in parent and child: no misuse.
 *   misuse fork-unlock       main locks m, forks; the child unlocks its copy
 *                            (a thread of the child owns it): no misuse.
 *
 * Output: "mode <mode>", then what each call returned. */
#include "common.h"
#include <sys/mman.h>
#include <sys/wait.h>

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

static pthread_mutex_t never = PTHREAD_MUTEX_INITIALIZER;

static void prepare(void) { CHECK(pthread_mutex_lock(&m)); }
static void parent_side(void) { CHECK(pthread_mutex_unlock(&m)); }
static void child_side(void) { CHECK(pthread_mutex_unlock(&m)); }

static int fork_and_wait(void (*in_child)(void))
{
    fflush(stdout);
    pid_t child = fork();
    if (child < 0)
        return 3;
    if (child == 0) {
        if (in_child)
            in_child();
        _exit(0);
    }
    int status;
    return waitpid(child, &status, 0) == child && WIFEXITED(status) ? WEXITSTATUS(status) : 3;
}

static void unlock_m(void) { CHECK(pthread_mutex_unlock(&m)); }

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
    } else if (!strcmp(mode, "relock-rw")) {
        pthread_rwlock_t rw;
        CHECK(pthread_rwlock_init(&rw, NULL));
        CHECK(pthread_rwlock_wrlock(&rw));
        printf("relock-rw %s\n", pthread_rwlock_rdlock(&rw) == EDEADLK ? "EDEADLK" : "other"); /* @relock-rw */
        CHECK(pthread_rwlock_unlock(&rw));
        CHECK(pthread_rwlock_destroy(&rw));
    } else if (!strcmp(mode, "two-lines")) {
        printf("twice-a %d\n", pthread_mutex_unlock(&m)); /* @twice-a */
        printf("twice-b %d\n", pthread_mutex_unlock(&m)); /* @twice-b */
    } else if (!strcmp(mode, "never-locked")) {
        printf("never-locked %d\n", pthread_mutex_unlock(&never)); /* @never-locked */
    } else if (!strcmp(mode, "unmapped")) {
        pthread_rwlock_t *l = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (l == MAP_FAILED)
            return 3;
        CHECK(pthread_rwlock_init(l, NULL));
        CHECK(pthread_rwlock_rdlock(l));
        CHECK(pthread_rwlock_unlock(l));
        CHECK(munmap(l, 4096));
        printf("destroy-unmapped %d\n", pthread_rwlock_destroy(l));
    } else if (!strcmp(mode, "deep")) {
        static pthread_mutex_t nest[40];
        for (int i = 0; i < 40; i++)
            CHECK(pthread_mutex_init(&nest[i], NULL));
        for (int i = 0; i < 40; i++)
            CHECK(pthread_mutex_lock(&nest[i]));
        for (int i = 0; i < 40; i++)
            CHECK(pthread_mutex_unlock(&nest[i]));
        for (int i = 39; i >= 0; i--) {
            CHECK(pthread_mutex_lock(&nest[i]));
            CHECK(pthread_mutex_unlock(&nest[i]));
        }
    } else if (!strcmp(mode, "recursive")) {
        pthread_mutexattr_t attr;
        pthread_mutex_t r;
        CHECK(pthread_mutexattr_init(&attr));
        CHECK(pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE));
        CHECK(pthread_mutex_init(&r, &attr));
        for (int i = 0; i < 3; i++)
            CHECK(pthread_mutex_lock(&r));
        for (int i = 0; i < 3; i++)
            CHECK(pthread_mutex_unlock(&r));
        CHECK(pthread_mutex_destroy(&r));
    } else if (!strcmp(mode, "atfork")) {
        CHECK(pthread_atfork(prepare, parent_side, child_side));
        for (int i = 0; i < 3; i++)
            if (fork_and_wait(NULL) != 0)
                return 3;
    } else if (!strcmp(mode, "fork-unlock")) {
        CHECK(pthread_mutex_lock(&m));
        if (fork_and_wait(unlock_m) != 0)
            return 3;
        CHECK(pthread_mutex_unlock(&m));
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
