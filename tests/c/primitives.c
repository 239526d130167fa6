/* Ground truth for the primitives other than mutexes: rwlocks, spinlocks,
 * semaphores (unnamed and named) and barriers.
 *
 * Every count the report must show follows from the constants below; the
 * phases run one after another, so nothing but the forced rounds can make a
 * reader wait for the rwlock, and nothing but the marked blocking wait can
 * make a wait on sem_tw block.
 *
 * stdout: "key value" lines with return codes / errno names of the
 * interesting calls and results that do not depend on timing, so a run with
 * the shim must print exactly what a run without it prints.
 * stderr: "addr <name> <pointer>" lines (addresses change from run to run
 * with ASLR, so they are kept out of stdout).
 *
 * Phases:
 *   rwlock  RD_THREADS readers x RD_ITERS rdlock (concurrently, readers only),
 *           then WR_THREADS writers x WR_ITERS wrlock (writers only);
 *           main: one successful tryrdlock, trywrlock, timedrdlock,
 *           timedwrlock, clockrdlock, clockwrlock on the free lock; four
 *           calls with an invalid deadline or clock (EINVAL, nothing
 *           acquired); a holder thread holds a read lock (main: trywrlock
 *           EBUSY, timedwrlock ETIMEDOUT, tryrdlock succeeds), then a write
 *           lock (main: tryrdlock EBUSY, clockrdlock ETIMEDOUT, trywrlock
 *           EBUSY); then RW_ROUNDS rounds in which thread A holds the write
 *           lock until thread B is asleep in rdlock.
 *   spin    SPIN_THREADS x SPIN_ITERS spin_lock; worker 0 then holds it once
 *           more while main's trylock fails; main then SPIN_TRIES trylocks.
 *   sem_pc  producer posts SEM_ITEMS, consumer waits SEM_ITEMS.
 *   sem_tw  initial value SEM_INIT; a worker: SEM_INIT successful trywaits,
 *           SEM_TRY_FAILS failing (EAGAIN); main: timedwait and clockwait
 *           time out; main blocks in sem_wait (errno 4242 before) until the
 *           worker, having seen main asleep, posts once.
 *   sem_av  value 1; main: sem_timedwait / sem_clockwait with an invalid
 *           deadline or clock (EINVAL); nothing acquired, value stays 1.
 *   sem_one main alone posts SEM_SINGLE times and waits SEM_SINGLE times.
 *   named   sem_open(O_CREAT): a thread posts SEM_NAMED times, main then
 *           waits SEM_NAMED times; sem_close, sem_unlink.
 *   barrier BAR_THREADS threads x BAR_ROUNDS waits on a barrier of
 *           BAR_THREADS. */
#include "common.h"

#include <fcntl.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#define RD_THREADS 4
#define RD_ITERS 2000
#define WR_THREADS 3
#define WR_ITERS 1000
#define RW_ROUNDS 4
#define HOLD_MS 5
#define TIMEOUT_MS 5

#define SPIN_THREADS 3
#define SPIN_ITERS 2000
#define SPIN_TRIES 7

#define SEM_ITEMS 1000
#define SEM_INIT 5
#define SEM_TRY_FAILS 3
#define SEM_SINGLE 25
#define SEM_NAMED 40

#define BAR_THREADS 4
#define BAR_ROUNDS 50

/* ------------------------------------------------------------ helpers */

static const char *err_name(int e)
{
    static char buf[32];
    switch (e) {
    case 0: return "0";
    case EBUSY: return "EBUSY";
    case EAGAIN: return "EAGAIN";
    case ETIMEDOUT: return "ETIMEDOUT";
    case EINVAL: return "EINVAL";
    case EDEADLK: return "EDEADLK";
    case EPERM: return "EPERM";
    case EINTR: return "EINTR";
    default:
        snprintf(buf, sizeof buf, "%d", e);
        return buf;
    }
}

/* A pthread-style return code. */
static void say_rc(const char *key, int rc)
{
    printf("%s %s\n", key, err_name(rc));
}

/* A semaphore-style result: 0, or the errno of a -1. */
static void say_sem(const char *key, int rc, int err)
{
    printf("%s %s\n", key, rc == 0 ? "0" : err_name(err));
}

static void say_num(const char *key, long long v)
{
    printf("%s %lld\n", key, v);
}

static void addr(const char *name, const void *p)
{
    fprintf(stderr, "addr %s %p\n", name, p);
}

/* An absolute deadline ms milliseconds from now on clock c. */
static struct timespec deadline(clockid_t c, long ms)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    ts.tv_nsec += (ms % 1000) * 1000000L;
    ts.tv_sec += ms / 1000 + ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    return ts;
}

static int gettid_(void)
{
    return (int)syscall(SYS_gettid);
}

/* Scheduler state letter of thread tid ('R', 'S', 'D', ...), or '?'.
 * Raw open/read: no stdio lock involved. */
static char thread_state(int tid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return '?';
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return '?';
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    return (p && p[1] == ' ') ? p[2] : '?';
}

/* Waits (up to 2 s) until thread tid is asleep, then HOLD_MS more. */
static void wait_asleep(int tid)
{
    long long give_up = now_ns() + 2000000000LL;
    while (thread_state(tid) != 'S' && now_ns() < give_up)
        sleep_ms(1);
    sleep_ms(HOLD_MS);
}

static void spin_until(atomic_int *v, int want)
{
    while (atomic_load(v) != want)
        sched_yield();
}

static pthread_t start(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    CHECK(pthread_create(&t, NULL, fn, arg));
    return t;
}

/* -------------------------------------------------------------- rwlock */

static pthread_rwlock_t rw;
static long rw_value;          /* written under the write lock */
static atomic_long rw_reads;   /* counted under the read lock */

static atomic_int holder_step; /* 1: holds read, 2: holds write */
static atomic_int main_step;

static atomic_int a_locked, b_trying, b_done, b_tid;

void *rw_reader(void *arg)
{
    (void)arg;
    for (int i = 0; i < RD_ITERS; i++) {
        CHECK(pthread_rwlock_rdlock(&rw)); /* @rw-rdlock */
        atomic_fetch_add(&rw_reads, 1);
        CHECK(pthread_rwlock_unlock(&rw));
    }
    return NULL;
}

void *rw_writer(void *arg)
{
    (void)arg;
    for (int i = 0; i < WR_ITERS; i++) {
        CHECK(pthread_rwlock_wrlock(&rw)); /* @rw-wrlock */
        rw_value++;
        CHECK(pthread_rwlock_unlock(&rw));
    }
    return NULL;
}

void *rw_holder(void *arg)
{
    (void)arg;
    CHECK(pthread_rwlock_rdlock(&rw)); /* @rw-holder-rd */
    atomic_store(&holder_step, 1);
    spin_until(&main_step, 1);
    CHECK(pthread_rwlock_unlock(&rw));
    CHECK(pthread_rwlock_wrlock(&rw)); /* @rw-holder-wr */
    atomic_store(&holder_step, 2);
    spin_until(&main_step, 2);
    CHECK(pthread_rwlock_unlock(&rw));
    return NULL;
}

void rw_a_round(int round)
{
    CHECK(pthread_rwlock_wrlock(&rw)); /* @rw-a-wrlock */
    atomic_store(&a_locked, round);
    spin_until(&b_trying, round);
    wait_asleep(atomic_load(&b_tid));
    CHECK(pthread_rwlock_unlock(&rw));
    spin_until(&b_done, round);
}

void rw_b_round(int round)
{
    spin_until(&a_locked, round);
    atomic_store(&b_trying, round);
    CHECK(pthread_rwlock_rdlock(&rw)); /* @rw-b-rdlock */
    CHECK(pthread_rwlock_unlock(&rw));
    atomic_store(&b_done, round);
}

void *rw_a(void *arg)
{
    (void)arg;
    for (int r = 1; r <= RW_ROUNDS; r++)
        rw_a_round(r);
    return NULL;
}

void *rw_b(void *arg)
{
    (void)arg;
    atomic_store(&b_tid, gettid_());
    for (int r = 1; r <= RW_ROUNDS; r++)
        rw_b_round(r);
    return NULL;
}

void rwlock_phase(void)
{
    pthread_t t[RD_THREADS + WR_THREADS];
    int rc;
    struct timespec ts;

    CHECK(pthread_rwlock_init(&rw, NULL));
    addr("rw", &rw);

    for (int i = 0; i < RD_THREADS; i++)
        t[i] = start(rw_reader, NULL);
    for (int i = 0; i < RD_THREADS; i++)
        CHECK(pthread_join(t[i], NULL));
    for (int i = 0; i < WR_THREADS; i++)
        t[i] = start(rw_writer, NULL);
    for (int i = 0; i < WR_THREADS; i++)
        CHECK(pthread_join(t[i], NULL));
    say_num("rw-reads", atomic_load(&rw_reads));
    say_num("rw-value", rw_value);

    /* One of each on the free lock: all succeed at once. */
    rc = pthread_rwlock_tryrdlock(&rw); /* @rw-main-tryrd */
    say_rc("rw-tryrdlock-free", rc);
    CHECK(pthread_rwlock_unlock(&rw));
    rc = pthread_rwlock_trywrlock(&rw); /* @rw-main-trywr */
    say_rc("rw-trywrlock-free", rc);
    CHECK(pthread_rwlock_unlock(&rw));
    ts = deadline(CLOCK_REALTIME, 1000);
    rc = pthread_rwlock_timedrdlock(&rw, &ts); /* @rw-main-timedrd */
    say_rc("rw-timedrdlock-free", rc);
    CHECK(pthread_rwlock_unlock(&rw));
    ts = deadline(CLOCK_REALTIME, 1000);
    rc = pthread_rwlock_timedwrlock(&rw, &ts); /* @rw-main-timedwr */
    say_rc("rw-timedwrlock-free", rc);
    CHECK(pthread_rwlock_unlock(&rw));
    ts = deadline(CLOCK_MONOTONIC, 1000);
    rc = pthread_rwlock_clockrdlock(&rw, CLOCK_MONOTONIC, &ts); /* @rw-main-clockrd */
    say_rc("rw-clockrdlock-free", rc);
    CHECK(pthread_rwlock_unlock(&rw));
    ts = deadline(CLOCK_REALTIME, 1000);
    rc = pthread_rwlock_clockwrlock(&rw, CLOCK_REALTIME, &ts); /* @rw-main-clockwr */
    say_rc("rw-clockwrlock-free", rc);
    CHECK(pthread_rwlock_unlock(&rw));

    /* Invalid deadlines / clocks on the free lock: glibc refuses them with
     * EINVAL before looking at the lock, so nothing is acquired. */
    struct timespec bad_hi = deadline(CLOCK_REALTIME, 1000);
    bad_hi.tv_nsec = 1000000000L;
    struct timespec bad_neg = deadline(CLOCK_REALTIME, 1000);
    bad_neg.tv_nsec = -1;
    struct timespec good = deadline(CLOCK_MONOTONIC, 1000);
    rc = pthread_rwlock_timedrdlock(&rw, &bad_hi);
    say_rc("rw-timedrdlock-bad-nsec", rc);
    rc = pthread_rwlock_timedwrlock(&rw, &bad_neg);
    say_rc("rw-timedwrlock-negative-nsec", rc);
    rc = pthread_rwlock_clockrdlock(&rw, CLOCK_PROCESS_CPUTIME_ID, &good);
    say_rc("rw-clockrdlock-bad-clock", rc);
    rc = pthread_rwlock_clockwrlock(&rw, CLOCK_MONOTONIC, &bad_hi);
    say_rc("rw-clockwrlock-bad-nsec", rc);

    /* Another thread holds a read lock, then a write lock. */
    pthread_t h = start(rw_holder, NULL);
    spin_until(&holder_step, 1);
    rc = pthread_rwlock_trywrlock(&rw); /* @rw-main-trywr-busy */
    say_rc("rw-trywrlock-read-held", rc);
    ts = deadline(CLOCK_REALTIME, TIMEOUT_MS);
    rc = pthread_rwlock_timedwrlock(&rw, &ts); /* @rw-main-timedwr-timeout */
    say_rc("rw-timedwrlock-read-held", rc);
    rc = pthread_rwlock_tryrdlock(&rw); /* @rw-main-tryrd-shared */
    say_rc("rw-tryrdlock-read-held", rc);
    CHECK(pthread_rwlock_unlock(&rw));
    atomic_store(&main_step, 1);
    spin_until(&holder_step, 2);
    rc = pthread_rwlock_tryrdlock(&rw); /* @rw-main-tryrd-busy */
    say_rc("rw-tryrdlock-write-held", rc);
    ts = deadline(CLOCK_MONOTONIC, TIMEOUT_MS);
    rc = pthread_rwlock_clockrdlock(&rw, CLOCK_MONOTONIC, &ts); /* @rw-main-clockrd-timeout */
    say_rc("rw-clockrdlock-write-held", rc);
    rc = pthread_rwlock_trywrlock(&rw); /* @rw-main-trywr-busy2 */
    say_rc("rw-trywrlock-write-held", rc);
    atomic_store(&main_step, 2);
    CHECK(pthread_join(h, NULL));

    /* Forced contention: B's rdlock waits for A's write lock every round. */
    pthread_t b = start(rw_b, NULL);
    while (atomic_load(&b_tid) == 0)
        sched_yield();
    pthread_t a = start(rw_a, NULL);
    CHECK(pthread_join(a, NULL));
    CHECK(pthread_join(b, NULL));
    say_num("rw-rounds", RW_ROUNDS);

    say_rc("rw-destroy", pthread_rwlock_destroy(&rw));
}

/* ---------------------------------------------------------- spinlock */

static pthread_spinlock_t spin;
static long spin_count;             /* under the spinlock */
static atomic_int spin_loops_done;  /* workers past their loop */
static atomic_int spin_held;        /* worker 0 holds it for main */
static atomic_int spin_release;     /* main is done with its trylock */

void *spin_worker(void *arg)
{
    long index = (long)arg;
    for (int i = 0; i < SPIN_ITERS; i++) {
        CHECK(pthread_spin_lock(&spin)); /* @spin-lock */
        spin_count++;
        CHECK(pthread_spin_unlock(&spin));
    }
    atomic_fetch_add(&spin_loops_done, 1);
    if (index == 0) {
        /* Only once nobody else spins on it. */
        spin_until(&spin_loops_done, SPIN_THREADS);
        CHECK(pthread_spin_lock(&spin)); /* @spin-hold */
        atomic_store(&spin_held, 1);
        spin_until(&spin_release, 1);
        CHECK(pthread_spin_unlock(&spin));
    }
    return NULL;
}

void spin_phase(void)
{
    pthread_t t[SPIN_THREADS];
    CHECK(pthread_spin_init(&spin, PTHREAD_PROCESS_PRIVATE));
    addr("spin", (const void *)&spin);
    for (long i = 0; i < SPIN_THREADS; i++)
        t[i] = start(spin_worker, (void *)i);
    spin_until(&spin_held, 1);
    int rc = pthread_spin_trylock(&spin); /* @spin-trylock-busy */
    say_rc("spin-trylock-held", rc);
    atomic_store(&spin_release, 1);
    for (int i = 0; i < SPIN_THREADS; i++)
        CHECK(pthread_join(t[i], NULL));
    int ok = 0;
    for (int i = 0; i < SPIN_TRIES; i++) {
        rc = pthread_spin_trylock(&spin); /* @spin-trylock */
        if (rc == 0) {
            ok++;
            CHECK(pthread_spin_unlock(&spin));
        }
    }
    say_num("spin-trylocks-ok", ok);
    say_num("spin-count", spin_count);
    say_rc("spin-destroy", pthread_spin_destroy(&spin));
}

/* -------------------------------------------------------- semaphores */

static sem_t sem_pc, sem_tw, sem_av, sem_one;
static sem_t *sem_named;
static long pc_items[SEM_ITEMS];

static atomic_int tw_ok, tw_fail_eagain, tw_step, main_tid, main_blocking;

void *pc_producer(void *arg)
{
    (void)arg;
    for (int i = 0; i < SEM_ITEMS; i++) {
        pc_items[i] = 3L * i;
        CHECK(sem_post(&sem_pc)); /* @pc-post */
    }
    return NULL;
}

void *pc_consumer(void *arg)
{
    long *sum = arg;
    for (int i = 0; i < SEM_ITEMS; i++) {
        CHECK(sem_wait(&sem_pc)); /* @pc-wait */
        *sum += pc_items[i];
    }
    return NULL;
}

void *tw_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < SEM_INIT; i++) {
        if (sem_trywait(&sem_tw) == 0) /* @tw-trywait-ok */
            atomic_fetch_add(&tw_ok, 1);
    }
    for (int i = 0; i < SEM_TRY_FAILS; i++) {
        if (sem_trywait(&sem_tw) == -1 && errno == EAGAIN) /* @tw-trywait-fail */
            atomic_fetch_add(&tw_fail_eagain, 1);
    }
    atomic_store(&tw_step, 1);
    /* Post only once main is asleep in its sem_wait. */
    spin_until(&main_blocking, 1);
    wait_asleep(atomic_load(&main_tid));
    CHECK(sem_post(&sem_tw)); /* @tw-post */
    return NULL;
}

void *named_poster(void *arg)
{
    (void)arg;
    for (int i = 0; i < SEM_NAMED; i++)
        CHECK(sem_post(sem_named)); /* @named-post */
    return NULL;
}

void sem_phase(void)
{
    int rc, e, v;
    struct timespec ts;

    /* Producer / consumer. */
    CHECK(sem_init(&sem_pc, 0, 0));
    addr("sem_pc", &sem_pc);
    long sum = 0;
    pthread_t c = start(pc_consumer, &sum);
    pthread_t p = start(pc_producer, NULL);
    CHECK(pthread_join(p, NULL));
    CHECK(pthread_join(c, NULL));
    say_num("sem-pc-sum", sum);
    CHECK(sem_getvalue(&sem_pc, &v));
    say_num("sem-pc-value", v);
    say_rc("sem-pc-destroy", sem_destroy(&sem_pc));

    /* Trywait, timeouts, a blocking wait that keeps errno. */
    CHECK(sem_init(&sem_tw, 0, SEM_INIT));
    addr("sem_tw", &sem_tw);
    atomic_store(&main_tid, gettid_());
    pthread_t w = start(tw_worker, NULL);
    spin_until(&tw_step, 1);
    say_num("sem-trywait-ok", atomic_load(&tw_ok));
    say_num("sem-trywait-eagain", atomic_load(&tw_fail_eagain));
    ts = deadline(CLOCK_REALTIME, TIMEOUT_MS);
    errno = 0;
    rc = sem_timedwait(&sem_tw, &ts); /* @tw-timedwait */
    e = errno;
    say_sem("sem-timedwait-empty", rc, e);
    ts = deadline(CLOCK_MONOTONIC, TIMEOUT_MS);
    errno = 0;
    rc = sem_clockwait(&sem_tw, CLOCK_MONOTONIC, &ts); /* @tw-clockwait */
    e = errno;
    say_sem("sem-clockwait-empty", rc, e);
    errno = 4242;
    atomic_store(&main_blocking, 1);
    rc = sem_wait(&sem_tw); /* @tw-wait-blocking */
    e = errno;
    say_sem("sem-wait-blocked", rc, e);
    say_num("errno-after-blocked-sem-wait", e);
    CHECK(pthread_join(w, NULL));
    CHECK(sem_getvalue(&sem_tw, &v));
    say_num("sem-tw-value", v);
    say_rc("sem-tw-destroy", sem_destroy(&sem_tw));

    /* Invalid deadline or clock on an available semaphore: EINVAL, and the
     * semaphore is not taken. */
    CHECK(sem_init(&sem_av, 0, 1));
    addr("sem_av", &sem_av);
    struct timespec bad_hi = deadline(CLOCK_REALTIME, 1000);
    bad_hi.tv_nsec = 1000000000L;
    struct timespec bad_neg = deadline(CLOCK_MONOTONIC, 1000);
    bad_neg.tv_nsec = -1;
    struct timespec good = deadline(CLOCK_MONOTONIC, 1000);
    errno = 0;
    rc = sem_timedwait(&sem_av, &bad_hi);
    e = errno;
    say_sem("sem-timedwait-bad-nsec", rc, e);
    errno = 0;
    rc = sem_clockwait(&sem_av, CLOCK_MONOTONIC, &bad_neg);
    e = errno;
    say_sem("sem-clockwait-negative-nsec", rc, e);
    errno = 0;
    rc = sem_clockwait(&sem_av, CLOCK_PROCESS_CPUTIME_ID, &good);
    e = errno;
    say_sem("sem-clockwait-bad-clock", rc, e);
    CHECK(sem_getvalue(&sem_av, &v));
    say_num("sem-av-value", v);
    say_rc("sem-av-destroy", sem_destroy(&sem_av));

    /* One thread only. */
    CHECK(sem_init(&sem_one, 0, 0));
    addr("sem_one", &sem_one);
    for (int i = 0; i < SEM_SINGLE; i++)
        CHECK(sem_post(&sem_one)); /* @one-post */
    errno = 4242;
    int kept = 0;
    for (int i = 0; i < SEM_SINGLE; i++) {
        CHECK(sem_wait(&sem_one)); /* @one-wait */
        kept += errno == 4242;
    }
    say_num("sem-one-errno-kept", kept);
    say_rc("sem-one-destroy", sem_destroy(&sem_one));

    /* Named. */
    char name[64];
    snprintf(name, sizeof name, "/locksuit-test-%d", (int)getpid());
    sem_unlink(name);
    sem_named = sem_open(name, O_CREAT, 0600, 0);
    if (sem_named == SEM_FAILED) {
        perror("sem_open");
        exit(3);
    }
    addr("sem_named", sem_named);
    pthread_t np = start(named_poster, NULL);
    CHECK(pthread_join(np, NULL));
    int got = 0;
    for (int i = 0; i < SEM_NAMED; i++)
        got += sem_wait(sem_named) == 0; /* @named-wait */
    say_num("sem-named-waits", got);
    CHECK(sem_getvalue(sem_named, &v));
    say_num("sem-named-value", v);
    say_rc("sem-named-close", sem_close(sem_named));
    say_rc("sem-named-unlink", sem_unlink(name));
}

/* ----------------------------------------------------------- barrier */

static pthread_barrier_t bar;
static atomic_int bar_serial, bar_zero;

void *bar_worker(void *arg)
{
    (void)arg;
    for (int r = 0; r < BAR_ROUNDS; r++) {
        int rc = pthread_barrier_wait(&bar); /* @bar-wait */
        if (rc == PTHREAD_BARRIER_SERIAL_THREAD)
            atomic_fetch_add(&bar_serial, 1);
        else if (rc == 0)
            atomic_fetch_add(&bar_zero, 1);
        else
            die_rc("pthread_barrier_wait", rc, __LINE__);
    }
    return NULL;
}

void barrier_phase(void)
{
    pthread_t t[BAR_THREADS];
    CHECK(pthread_barrier_init(&bar, NULL, BAR_THREADS));
    addr("bar", &bar);
    for (int i = 0; i < BAR_THREADS; i++)
        t[i] = start(bar_worker, NULL);
    for (int i = 0; i < BAR_THREADS; i++)
        CHECK(pthread_join(t[i], NULL));
    say_num("bar-serial", atomic_load(&bar_serial));
    say_num("bar-zero", atomic_load(&bar_zero));
    say_rc("bar-destroy", pthread_barrier_destroy(&bar));
}

int main(void)
{
    say_num("rd-threads", RD_THREADS);
    say_num("rd-iters", RD_ITERS);
    say_num("wr-threads", WR_THREADS);
    say_num("wr-iters", WR_ITERS);
    say_num("spin-threads", SPIN_THREADS);
    say_num("spin-iters", SPIN_ITERS);
    say_num("bar-threads", BAR_THREADS);
    say_num("bar-rounds", BAR_ROUNDS);
    rwlock_phase();
    spin_phase();
    sem_phase();
    barrier_phase();
    return 0;
}
