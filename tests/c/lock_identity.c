/* Ground truth for lock identity.
 *
 *   lock_identity static   a PTHREAD_MUTEX_INITIALIZER lock taken STATIC_USES
 *                          times. Prints "static <addr>".
 *   lock_identity reinit   one address: init, FIRST_USES locks, destroy, init,
 *                          SECOND_USES locks, destroy. Prints "reinit <addr>".
 *   lock_identity waves    WAVES waves of WAVE_THREADS threads; each thread
 *                          inits, locks, unlocks and destroys a mutex on its
 *                          own stack (stacks are reused between waves, so
 *                          addresses repeat). Prints "locks <n>" and
 *                          "distinct-addresses <n>". */
#include "common.h"

#define STATIC_USES 137
#define FIRST_USES 50
#define SECOND_USES 70
#define WAVES 3
#define WAVE_THREADS 100
#define WAVE_STACK (256 * 1024)

static pthread_mutex_t static_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t reinit_lock;

static void *wave_addr[WAVES * WAVE_THREADS];

static void run_static(void)
{
    printf("static %p\n", (void *)&static_lock);
    for (int i = 0; i < STATIC_USES; i++) {
        CHECK(pthread_mutex_lock(&static_lock)); /* @static-lock */
        CHECK(pthread_mutex_unlock(&static_lock));
    }
}

static void run_reinit(void)
{
    printf("reinit %p\n", (void *)&reinit_lock);
    CHECK(pthread_mutex_init(&reinit_lock, NULL));
    for (int i = 0; i < FIRST_USES; i++) {
        CHECK(pthread_mutex_lock(&reinit_lock)); /* @reinit-first */
        CHECK(pthread_mutex_unlock(&reinit_lock));
    }
    CHECK(pthread_mutex_destroy(&reinit_lock));
    CHECK(pthread_mutex_init(&reinit_lock, NULL));
    for (int i = 0; i < SECOND_USES; i++) {
        CHECK(pthread_mutex_lock(&reinit_lock)); /* @reinit-second */
        CHECK(pthread_mutex_unlock(&reinit_lock));
    }
    CHECK(pthread_mutex_destroy(&reinit_lock));
}

void *wave_worker(void *arg)
{
    void **slot = arg;
    pthread_mutex_t m;
    *slot = &m;
    CHECK(pthread_mutex_init(&m, NULL));
    CHECK(pthread_mutex_lock(&m)); /* @wave-lock */
    CHECK(pthread_mutex_unlock(&m));
    CHECK(pthread_mutex_destroy(&m));
    return NULL;
}

static int cmp_ptr(const void *a, const void *b)
{
    void *x = *(void *const *)a, *y = *(void *const *)b;
    return x < y ? -1 : x > y;
}

static void run_waves(void)
{
    pthread_attr_t attr;
    pthread_t th[WAVE_THREADS];
    CHECK(pthread_attr_init(&attr));
    CHECK(pthread_attr_setstacksize(&attr, WAVE_STACK));
    for (int w = 0; w < WAVES; w++) {
        for (int i = 0; i < WAVE_THREADS; i++)
            CHECK(pthread_create(&th[i], &attr, wave_worker, &wave_addr[w * WAVE_THREADS + i]));
        for (int i = 0; i < WAVE_THREADS; i++)
            CHECK(pthread_join(th[i], NULL));
    }
    CHECK(pthread_attr_destroy(&attr));

    int n = WAVES * WAVE_THREADS, distinct = 0;
    qsort(wave_addr, n, sizeof wave_addr[0], cmp_ptr);
    for (int i = 0; i < n; i++)
        if (i == 0 || wave_addr[i] != wave_addr[i - 1])
            distinct++;
    printf("locks %d\n", n);
    printf("distinct-addresses %d\n", distinct);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s static|reinit|waves\n", argv[0]);
        return 2;
    }
    if (strcmp(argv[1], "static") == 0)
        run_static();
    else if (strcmp(argv[1], "reinit") == 0)
        run_reinit();
    else if (strcmp(argv[1], "waves") == 0)
        run_waves();
    else {
        fprintf(stderr, "unknown mode %s\n", argv[1]);
        return 2;
    }
    return 0;
}
