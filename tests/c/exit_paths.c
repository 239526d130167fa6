/* Ground truth for the ways a process (or a thread) ends.
 *
 *   exit_paths atexit       main returns 0; an atexit handler then locks
 *                           atexit_lock N times and a destructor locks
 *                           dtor_lock N times.
 *   exit_paths atexit-exit  the same, but main calls exit(7).
 *   exit_paths keydtor      a worker locks key_lock W times, sets a value for
 *                           the program's own pthread_key, and returns; the
 *                           key's destructor locks key_lock M times while the
 *                           thread exits. main joins and prints the counts.
 *   exit_paths exit-thread  a waiter blocks in pthread_cond_wait (never
 *                           signalled); another thread, once the waiter is
 *                           certainly waiting, calls exit(3). wait_lock is
 *                           acquired exactly twice (waiter once, exiter once).
 *   exit_paths _exit        main locks lock N times and calls _exit(5).
 *   exit_paths quick_exit   main locks lock N times and calls quick_exit(6);
 *                           an at_quick_exit handler locks atexit_lock N
 *                           times first.
 *   exit_paths pthread-exit main starts a worker and calls pthread_exit; the
 *                           worker joins the (ended) main thread, then locks
 *                           lock N times and returns; the process exits 0.
 *   exit_paths pthread-exit-worker
 *                           a worker locks lock N times and ends with
 *                           pthread_exit; main joins it and returns 0.
 *   exit_paths syscall-exit-group
 *                           main locks lock N times and calls
 *                           syscall(SYS_exit_group, 9).
 *   exit_paths syscall-exit-thread
 *                           a worker locks lock N times and ends with
 *                           syscall(SYS_exit, 0), which skips glibc's
 *                           thread-exit work; main joins it (the kernel
 *                           clears its tid) and returns 0.
 *   exit_paths syscall-exit-last
 *                           main, the only thread, locks lock N times and
 *                           ends with syscall(SYS_exit, 4): the process
 *                           exits 4.
 *
 * Every line is flushed before the process can end. */
#include "common.h"

#include <stdatomic.h>
#include <unistd.h>

#define N 30
#define W 20
#define M 11

static pthread_mutex_t atexit_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t dtor_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t key_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t wait_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int want_exit_handlers;
static pthread_key_t key;
static atomic_int key_dtor_locks;
static atomic_int waiting;
static pthread_t main_thread;

/* ---- atexit / destructor ------------------------------------------------ */

static void on_atexit(void)
{
    for (int i = 0; i < N; i++) {
        CHECK(pthread_mutex_lock(&atexit_lock)); /* @atexit-lock */
        CHECK(pthread_mutex_unlock(&atexit_lock));
    }
}

__attribute__((destructor)) static void on_destruct(void)
{
    if (!want_exit_handlers)
        return;
    for (int i = 0; i < N; i++) {
        CHECK(pthread_mutex_lock(&dtor_lock)); /* @dtor-lock */
        CHECK(pthread_mutex_unlock(&dtor_lock));
    }
}

/* ---- pthread_key destructor ---------------------------------------------- */

static void key_destructor(void *value)
{
    (void)value;
    for (int i = 0; i < M; i++) {
        CHECK(pthread_mutex_lock(&key_lock)); /* @keydtor-lock */
        atomic_fetch_add(&key_dtor_locks, 1);
        CHECK(pthread_mutex_unlock(&key_lock));
    }
}

static void *key_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < W; i++) {
        CHECK(pthread_mutex_lock(&key_lock)); /* @keyworker-lock */
        CHECK(pthread_mutex_unlock(&key_lock));
    }
    CHECK(pthread_setspecific(key, &key));
    return NULL;
}

/* ---- exit(3) from a thread while another is in pthread_cond_wait ---------- */

static void *waiter(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&wait_lock)); /* @waiter-lock */
    atomic_store(&waiting, 1); /* still holding wait_lock */
    for (;;)                   /* nobody ever signals `never` */
        CHECK(pthread_cond_wait(&never, &wait_lock));
    return NULL;
}

static void *exiter(void *arg)
{
    (void)arg;
    while (!atomic_load(&waiting))
        sleep_ms(1);
    /* The waiter holds wait_lock from setting `waiting` until
     * pthread_cond_wait releases it: getting it means the waiter waits. */
    CHECK(pthread_mutex_lock(&wait_lock)); /* @exiter-lock */
    CHECK(pthread_mutex_unlock(&wait_lock));
    printf("exiting 3\n");
    fflush(stdout);
    exit(3);
}

/* ---- raw exit system calls ----------------------------------------------- */

static void *raw_quitter(void *arg)
{
    (void)arg;
    for (int i = 0; i < N; i++) {
        CHECK(pthread_mutex_lock(&lock)); /* @raw-quitter-lock */
        CHECK(pthread_mutex_unlock(&lock));
    }
    syscall(SYS_exit, 0);
    return NULL;
}

/* ---- pthread_exit from main ----------------------------------------------- */

static void *survivor(void *arg)
{
    (void)arg;
    /* Returns only once the main thread has ended. */
    CHECK(pthread_join(main_thread, NULL));
    int uses = 0;
    for (int i = 0; i < N; i++) {
        CHECK(pthread_mutex_lock(&lock)); /* @survivor-lock */
        uses++;
        CHECK(pthread_mutex_unlock(&lock));
    }
    printf("survivor-uses %d\n", uses);
    fflush(stdout);
    return NULL;
}

static void *quitter(void *arg)
{
    (void)arg;
    for (int i = 0; i < N; i++) {
        CHECK(pthread_mutex_lock(&lock)); /* @quitter-lock */
        CHECK(pthread_mutex_unlock(&lock));
    }
    pthread_exit((void *)42);
}

int main(int argc, char **argv)
{
    const char *mode = argc == 2 ? argv[1] : "";
    printf("pid %d\n", (int)getpid());

    if (strcmp(mode, "atexit") == 0 || strcmp(mode, "atexit-exit") == 0) {
        printf("atexit_lock %p\n", (void *)&atexit_lock);
        printf("dtor_lock %p\n", (void *)&dtor_lock);
        fflush(stdout);
        want_exit_handlers = 1;
        if (atexit(on_atexit) != 0) {
            fprintf(stderr, "atexit failed\n");
            return 1;
        }
        if (strcmp(mode, "atexit-exit") == 0)
            exit(7);
        return 0;
    }

    if (strcmp(mode, "keydtor") == 0) {
        CHECK(pthread_key_create(&key, key_destructor));
        pthread_t th;
        CHECK(pthread_create(&th, NULL, key_worker, NULL));
        CHECK(pthread_join(th, NULL));
        printf("key_lock %p\n", (void *)&key_lock);
        printf("worker-locks %d\n", W);
        printf("key-destructor-locks %d\n", atomic_load(&key_dtor_locks));
        return 0;
    }

    if (strcmp(mode, "exit-thread") == 0) {
        printf("wait_lock %p\n", (void *)&wait_lock);
        printf("never %p\n", (void *)&never);
        fflush(stdout);
        pthread_t w, e;
        CHECK(pthread_create(&w, NULL, waiter, NULL));
        CHECK(pthread_create(&e, NULL, exiter, NULL));
        CHECK(pthread_join(e, NULL)); /* never returns: exiter calls exit(3) */
        fprintf(stderr, "exiter returned\n");
        return 1;
    }

    if (strcmp(mode, "_exit") == 0) {
        printf("lock %p\n", (void *)&lock);
        for (int i = 0; i < N; i++) {
            CHECK(pthread_mutex_lock(&lock)); /* @_exit-lock */
            CHECK(pthread_mutex_unlock(&lock));
        }
        printf("uses %d\n", N);
        fflush(stdout);
        _exit(5);
    }

    if (strcmp(mode, "quick_exit") == 0) {
        printf("lock %p\n", (void *)&lock);
        printf("atexit_lock %p\n", (void *)&atexit_lock);
        for (int i = 0; i < N; i++) {
            CHECK(pthread_mutex_lock(&lock)); /* @quick_exit-lock */
            CHECK(pthread_mutex_unlock(&lock));
        }
        printf("uses %d\n", N);
        fflush(stdout);
        if (at_quick_exit(on_atexit) != 0) {
            fprintf(stderr, "at_quick_exit failed\n");
            return 1;
        }
        quick_exit(6);
    }

    if (strcmp(mode, "pthread-exit") == 0) {
        printf("lock %p\n", (void *)&lock);
        fflush(stdout);
        main_thread = pthread_self();
        pthread_t th;
        CHECK(pthread_create(&th, NULL, survivor, NULL));
        pthread_exit(NULL);
    }

    if (strcmp(mode, "pthread-exit-worker") == 0) {
        printf("lock %p\n", (void *)&lock);
        pthread_t th;
        void *ret = NULL;
        CHECK(pthread_create(&th, NULL, quitter, NULL));
        CHECK(pthread_join(th, &ret));
        printf("worker-returned %ld\n", (long)ret);
        return 0;
    }

    if (strcmp(mode, "syscall-exit-group") == 0 || strcmp(mode, "syscall-exit-last") == 0) {
        printf("lock %p\n", (void *)&lock);
        for (int i = 0; i < N; i++) {
            CHECK(pthread_mutex_lock(&lock)); /* @raw-exit-lock */
            CHECK(pthread_mutex_unlock(&lock));
        }
        printf("uses %d\n", N);
        fflush(stdout);
        if (strcmp(mode, "syscall-exit-group") == 0)
            syscall(SYS_exit_group, 9);
        else
            syscall(SYS_exit, 4);
        return 1;
    }

    if (strcmp(mode, "syscall-exit-thread") == 0) {
        printf("lock %p\n", (void *)&lock);
        pthread_t th;
        CHECK(pthread_create(&th, NULL, raw_quitter, NULL));
        CHECK(pthread_join(th, NULL));
        printf("worker-uses %d\n", N);
        return 0;
    }

    fprintf(stderr,
            "usage: %s atexit|atexit-exit|keydtor|exit-thread|_exit|quick_exit|pthread-exit|"
            "pthread-exit-worker|syscall-exit-group|syscall-exit-thread|syscall-exit-last\n",
            argv[0]);
    return 2;
}
