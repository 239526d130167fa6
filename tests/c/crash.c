/* Ground truth for crash safety.
 *
 *   crash normal|kill|segv|abort
 *
 * A worker thread takes lock L WORKER_USES times, then stays alive (parked on
 * an atomic flag). Main then takes L MAIN_USES times; in the crash variants it
 * dies inside the last critical section, still holding L:
 *   kill  -> raise(SIGKILL)      segv -> write through a null pointer
 *   abort -> abort()             normal -> unlock, stop the worker, exit 0
 * Either way L was acquired exactly WORKER_USES + MAIN_USES times.
 *
 * Output (flushed before dying): "lock <addr>", "acquisitions <n>". */
#include "common.h"

#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <unistd.h>

#define WORKER_USES 500
#define MAIN_USES 734

static pthread_mutex_t L = PTHREAD_MUTEX_INITIALIZER;
static atomic_int worker_done;
static atomic_int stop_worker;

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < WORKER_USES; i++) {
        CHECK(pthread_mutex_lock(&L)); /* @worker-lock */
        CHECK(pthread_mutex_unlock(&L));
    }
    atomic_store(&worker_done, 1);
    while (!atomic_load(&stop_worker))
        sleep_ms(1);
    return NULL;
}

static void die_now(const char *mode)
{
    if (strcmp(mode, "kill") == 0) {
        raise(SIGKILL);
    } else if (strcmp(mode, "segv") == 0) {
        volatile int *volatile p = NULL;
        *p = 1;
    } else if (strcmp(mode, "abort") == 0) {
        abort();
    }
    fprintf(stderr, "still alive after %s\n", mode);
    _exit(4);
}

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "normal") && strcmp(argv[1], "kill") &&
                      strcmp(argv[1], "segv") && strcmp(argv[1], "abort"))) {
        fprintf(stderr, "usage: %s normal|kill|segv|abort\n", argv[0]);
        return 2;
    }
    int crash = strcmp(argv[1], "normal") != 0;

    /* No core files: they are slow and nobody reads them. */
    struct rlimit no_core = { 0, 0 };
    setrlimit(RLIMIT_CORE, &no_core);

    printf("lock %p\n", (void *)&L);
    printf("acquisitions %d\n", WORKER_USES + MAIN_USES);
    fflush(stdout);

    pthread_t th;
    CHECK(pthread_create(&th, NULL, worker, NULL));
    while (!atomic_load(&worker_done))
        sleep_ms(1);

    for (int i = 0; i < MAIN_USES; i++) {
        CHECK(pthread_mutex_lock(&L)); /* @main-lock */
        if (crash && i == MAIN_USES - 1)
            die_now(argv[1]);
        CHECK(pthread_mutex_unlock(&L));
    }
    atomic_store(&stop_worker, 1);
    CHECK(pthread_join(th, NULL));
    return 0;
}
