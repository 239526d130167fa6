/* Scale under the shim, with exact ground truth:
 *
 *   scale live N      N threads alive at once (held at a barrier), each
 *                     taking the shared lock once and its own lock once
 *   scale churn N W   N threads created and joined in waves of W, each
 *                     taking the shared lock once
 *   scale locks N     N heap mutexes alive at once, each initialised,
 *                     locked and unlocked once, then all destroyed
 *
 * Each mode prints its counts and the process's peak anonymous and file
 * memory (kB) from /proc/self/status, so the test can bound the shim's own
 * memory against a plain run. */
#include "common.h"

static pthread_mutex_t shared = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t all_alive;
static long shared_count;

static void print_memory(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f)) {
        if (!strncmp(line, "RssAnon:", 8) || !strncmp(line, "RssFile:", 8) || !strncmp(line, "VmHWM:", 6))
            fputs(line, stdout);
    }
    if (f)
        fclose(f);
}

static void *live_worker(void *arg)
{
    (void)arg;
    pthread_mutex_t own;
    CHECK(pthread_mutex_init(&own, NULL));
    CHECK(pthread_mutex_lock(&own)); /* @live-own */
    CHECK(pthread_mutex_unlock(&own));
    CHECK(pthread_mutex_lock(&shared)); /* @live-shared */
    shared_count++;
    CHECK(pthread_mutex_unlock(&shared));
    /* Everyone is alive at the same time before anyone leaves. */
    int rc = pthread_barrier_wait(&all_alive);
    if (rc != 0 && rc != PTHREAD_BARRIER_SERIAL_THREAD)
        CHECK(rc);
    CHECK(pthread_mutex_destroy(&own));
    return NULL;
}

static void *churn_worker(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&shared)); /* @churn-shared */
    shared_count++;
    CHECK(pthread_mutex_unlock(&shared));
    return NULL;
}

static void run_threads(long n, long wave, void *(*fn)(void *))
{
    pthread_attr_t attr;
    CHECK(pthread_attr_init(&attr));
    CHECK(pthread_attr_setstacksize(&attr, 64 * 1024));
    pthread_t *t = calloc((size_t)wave, sizeof *t);
    for (long done = 0; done < n; done += wave) {
        long k = n - done < wave ? n - done : wave;
        for (long i = 0; i < k; i++)
            CHECK(pthread_create(&t[i], &attr, fn, NULL));
        for (long i = 0; i < k; i++)
            CHECK(pthread_join(t[i], NULL));
    }
    free(t);
    CHECK(pthread_attr_destroy(&attr));
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s live N | churn N W | locks N\n", argv[0]);
        return 2;
    }
    long n = atol(argv[2]);
    if (!strcmp(argv[1], "live")) {
        CHECK(pthread_barrier_init(&all_alive, NULL, (unsigned)n));
        run_threads(n, n, live_worker);
        CHECK(pthread_barrier_destroy(&all_alive));
    } else if (!strcmp(argv[1], "churn") && argc == 4) {
        run_threads(n, atol(argv[3]), churn_worker);
    } else if (!strcmp(argv[1], "locks")) {
        pthread_mutex_t *locks = calloc((size_t)n, sizeof *locks);
        for (long i = 0; i < n; i++)
            CHECK(pthread_mutex_init(&locks[i], NULL));
        for (long i = 0; i < n; i++) {
            CHECK(pthread_mutex_lock(&locks[i])); /* @many-lock */
            CHECK(pthread_mutex_unlock(&locks[i]));
        }
        printf("first %p\nlast %p\n", (void *)&locks[0], (void *)&locks[n - 1]);
        print_memory(); /* all N alive here */
        for (long i = 0; i < n; i++)
            CHECK(pthread_mutex_destroy(&locks[i]));
        free(locks);
        printf("locks %ld\n", n);
        return 0;
    } else {
        fprintf(stderr, "unknown mode %s\n", argv[1]);
        return 2;
    }
    printf("shared %ld\n", shared_count);
    print_memory();
    return shared_count == n ? 0 : 1;
}
