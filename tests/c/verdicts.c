/* Ground truth for the report's verdicts. Each mode prints what the
 * program itself saw; the test compares the report with it.
 *
 *   verdicts asked      main holds L while a second thread fails a trylock
 *                       on it and then times out in a 30 ms timedlock:
 *                       one thread engaged L, two asked for it.
 *   verdicts starve     a hog thread takes L 400 times, holding it ~200 us
 *                       each time and taking it again at once; a second
 *                       thread asks for L once, while the hog runs. Prints
 *                       the longest hold the hog measured, the second
 *                       thread's wait, and how often the hog took L while
 *                       it waited ("passed-over").
 *   verdicts semswitch  a thread waits on a semaphore 100 times; each post
 *                       comes only once it is blocked in the kernel: 100
 *                       blocked waits, 100 posts that found it waiting.
 *   verdicts queue      main holds Q while 4 threads block on it, then
 *                       unlocks and relocks it 1000 times while they are
 *                       still queued; each of the 4 gets Q once.
 *   verdicts even N     N threads take E 1000 times each.
 *   verdicts hold       H is handed to a thread that had to wait for it
 *                       (so its hold is timed), which holds it 50 ms while
 *                       another thread waits; prints the hold it measured.
 *
 * Output: "name value" lines. */
#include "common.h"

#include <semaphore.h>
#include <stdatomic.h>

static pthread_mutex_t L = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t Q = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t E = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t H = PTHREAD_MUTEX_INITIALIZER;
static sem_t S;
static atomic_int stage;
static atomic_int tids[8];
static atomic_long hog_taken;
static atomic_int hog_done;

/* ---- asked ---------------------------------------------------------- */

static void *asker(void *arg)
{
    (void)arg;
    int rc = pthread_mutex_trylock(&L); /* @asked-try */
    printf("trylock %s\n", rc == EBUSY ? "EBUSY" : "other");
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 30 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    rc = pthread_mutex_timedlock(&L, &ts); /* @asked-timed */
    printf("timedlock %s\n", rc == ETIMEDOUT ? "ETIMEDOUT" : "other");
    return NULL;
}

/* ---- starve --------------------------------------------------------- */

static long long longest_hold;

static void *hog(void *arg)
{
    (void)arg;
    for (int i = 0; i < 400; i++) {
        CHECK(pthread_mutex_lock(&L)); /* @hog-lock */
        long long got = now_ns();
        atomic_fetch_add(&hog_taken, 1);
        if (i == 20)
            atomic_store(&stage, 1); /* let the other thread ask */
        while (now_ns() - got < 200 * 1000)
            ;
        long long held = now_ns() - got;
        if (held > longest_hold)
            longest_hold = held;
        CHECK(pthread_mutex_unlock(&L));
    }
    atomic_store(&hog_done, 1);
    return NULL;
}

static void *starved(void *arg)
{
    (void)arg;
    while (atomic_load(&stage) == 0)
        ;
    long before = atomic_load(&hog_taken);
    long long asked = now_ns();
    CHECK(pthread_mutex_lock(&L)); /* @starved-lock */
    long long waited = now_ns() - asked;
    long after = atomic_load(&hog_taken);
    CHECK(pthread_mutex_unlock(&L));
    printf("starved-wait-ns %lld\n", waited);
    printf("passed-over %ld\n", after - before);
    return NULL;
}

/* ---- semswitch ------------------------------------------------------ */

static void *sem_waiter(void *arg)
{
    (void)arg;
    atomic_store(&tids[0], gettid_now());
    for (int i = 0; i < 100; i++)
        while (sem_wait(&S) != 0) /* @sem-wait */
            ;
    return NULL;
}

/* ---- queue ---------------------------------------------------------- */

static void *queuer(void *arg)
{
    int i = (int)(long)arg;
    atomic_store(&tids[i], gettid_now());
    CHECK(pthread_mutex_lock(&Q)); /* @queue-lock */
    CHECK(pthread_mutex_unlock(&Q));
    return NULL;
}

/* ---- even ----------------------------------------------------------- */

static void *even_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 1000; i++) {
        CHECK(pthread_mutex_lock(&E)); /* @even-lock */
        CHECK(pthread_mutex_unlock(&E));
    }
    return NULL;
}

/* ---- hold ----------------------------------------------------------- */

static long long timed_hold;

static void *long_holder(void *arg)
{
    (void)arg;
    atomic_store(&tids[0], gettid_now());
    CHECK(pthread_mutex_lock(&H)); /* @holder-lock: waits for main first */
    long long got = now_ns();
    atomic_store(&stage, 2);
    /* Hold it 50 ms from when the other thread is certainly waiting. */
    while (!atomic_load(&tids[1]) || !in_futex_wait(atomic_load(&tids[1])))
        sleep_ms(1);
    sleep_ms(50);
    timed_hold = now_ns() - got;
    CHECK(pthread_mutex_unlock(&H));
    return NULL;
}

static void *hold_waiter(void *arg)
{
    (void)arg;
    while (atomic_load(&stage) != 2)
        sleep_ms(1);
    atomic_store(&tids[1], gettid_now());
    CHECK(pthread_mutex_lock(&H)); /* @hold-waiter */
    CHECK(pthread_mutex_unlock(&H));
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    pthread_t t[8];
    printf("pid %d\n", (int)getpid());
    if (strcmp(mode, "asked") == 0) {
        CHECK(pthread_mutex_lock(&L)); /* @asked-main */
        CHECK(pthread_create(&t[0], NULL, asker, NULL));
        CHECK(pthread_join(t[0], NULL));
        CHECK(pthread_mutex_unlock(&L));
    } else if (strcmp(mode, "starve") == 0) {
        CHECK(pthread_create(&t[0], NULL, hog, NULL));
        CHECK(pthread_create(&t[1], NULL, starved, NULL));
        CHECK(pthread_join(t[0], NULL));
        CHECK(pthread_join(t[1], NULL));
        printf("longest-hold-ns %lld\n", longest_hold);
    } else if (strcmp(mode, "semswitch") == 0) {
        CHECK(sem_init(&S, 0, 0));
        CHECK(pthread_create(&t[0], NULL, sem_waiter, NULL));
        for (int i = 0; i < 100; i++) {
            while (!atomic_load(&tids[0]) || !in_futex_wait(atomic_load(&tids[0])))
                ;
            CHECK(sem_post(&S)); /* @sem-post */
            /* Until it has taken this token (the value is back to 0). */
            int value = 1;
            while (value != 0)
                CHECK(sem_getvalue(&S, &value));
        }
        CHECK(pthread_join(t[0], NULL));
    } else if (strcmp(mode, "queue") == 0) {
        CHECK(pthread_mutex_lock(&Q)); /* @queue-main */
        for (long i = 1; i <= 4; i++)
            CHECK(pthread_create(&t[i], NULL, queuer, (void *)i));
        for (int i = 1; i <= 4; i++)
            while (!atomic_load(&tids[i]) || !in_futex_wait(atomic_load(&tids[i])))
                ;
        for (int i = 0; i < 1000; i++) {
            CHECK(pthread_mutex_unlock(&Q));
            CHECK(pthread_mutex_lock(&Q)); /* @queue-relock */
        }
        CHECK(pthread_mutex_unlock(&Q));
        for (int i = 1; i <= 4; i++)
            CHECK(pthread_join(t[i], NULL));
    } else if (strcmp(mode, "even") == 0) {
        int n = argc > 2 ? atoi(argv[2]) : 2;
        for (int i = 0; i < n; i++)
            CHECK(pthread_create(&t[i], NULL, even_worker, NULL));
        for (int i = 0; i < n; i++)
            CHECK(pthread_join(t[i], NULL));
    } else if (strcmp(mode, "hold") == 0) {
        CHECK(pthread_mutex_lock(&H)); /* @hold-main */
        CHECK(pthread_create(&t[0], NULL, long_holder, NULL));
        CHECK(pthread_create(&t[1], NULL, hold_waiter, NULL));
        while (!atomic_load(&tids[0]) || !in_futex_wait(atomic_load(&tids[0])))
            sleep_ms(1);
        CHECK(pthread_mutex_unlock(&H));
        CHECK(pthread_join(t[0], NULL));
        CHECK(pthread_join(t[1], NULL));
        printf("hold-ns %lld\n", timed_hold);
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    printf("L %p\nQ %p\nE %p\nH %p\nS %p\n", (void *)&L, (void *)&Q, (void *)&E, (void *)&H,
           (void *)&S);
    return 0;
}
