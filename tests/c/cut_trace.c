/* A trace file cut under the program (issue 33, item 4), and the
 * program's own SIGBUS handling, which must stay its own.
 *
 *   cut_trace cut        300 threads' worth of locks, then the program
 *                        truncates any open file named locksuit.*.trace (as
 *                        a cleanup job would; without the shim there is
 *                        none), then takes 2,000 new locks from 4 threads.
 *                        Prints "cut N" (files cut) and "after N" (locks
 *                        taken after), exits 0.
 *   cut_trace handler    installs its own SIGBUS handler, reads it back,
 *                        raises SIGBUS, then faults on a page of a file it
 *                        cut itself (its handler jumps out of the fault),
 *                        then cuts the trace as above and takes locks.
 *                        Prints "own-handler yes|no", "handled N" (its
 *                        handler's calls: 2), exits 0.
 *   cut_trace default    raises SIGBUS with the default action: dies of it.
 *
 * Output: "mode <mode>", then what each mode prints. */
#include "common.h"
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <sys/mman.h>

#define THREADS 4
#define LOCKS_AFTER 500

static volatile sig_atomic_t handled;
static sigjmp_buf out_of_fault;

static void on_bus(int sig, siginfo_t *info, void *ctx)
{
    (void)sig;
    (void)ctx;
    handled++;
    if (info->si_code > 0) /* a fault: leave the faulting access */
        siglongjmp(out_of_fault, 1);
}

/* Truncates every open file whose name is locksuit.*.trace. */
static int cut_traces(void)
{
    int cut = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char link[300], path[4096];
        snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(link, path, sizeof path - 1);
        if (n <= 0)
            continue;
        path[n] = 0;
        const char *base = strrchr(path, '/');
        base = base ? base + 1 : path;
        size_t len = strlen(base);
        if (!strncmp(base, "locksuit.", 9) && len > 6 && !strcmp(base + len - 6, ".trace"))
            cut += truncate(path, 0) == 0;
    }
    closedir(d);
    return cut;
}

static _Atomic long after;

static void *take_new_locks(void *arg)
{
    (void)arg;
    for (int i = 0; i < LOCKS_AFTER; i++) {
        pthread_mutex_t *m = malloc(sizeof *m); /* never freed: distinct */
        CHECK(pthread_mutex_init(m, NULL));
        CHECK(pthread_mutex_lock(m));
        CHECK(pthread_mutex_unlock(m));
        after++;
    }
    return NULL;
}

static void locks_then_cut(void)
{
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, take_new_locks, NULL));
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_join(t[i], NULL));
    printf("cut %d\n", cut_traces() > 0 ? 1 : 0);
    fflush(stdout);
    after = 0;
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, take_new_locks, NULL));
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_join(t[i], NULL));
    printf("after %ld\n", (long)after);
}

static int own_handler(void)
{
    struct sigaction act, back;
    memset(&act, 0, sizeof act);
    act.sa_sigaction = on_bus;
    act.sa_flags = SA_SIGINFO;
    sigemptyset(&act.sa_mask);
    CHECK(sigaction(SIGBUS, &act, NULL));
    CHECK(sigaction(SIGBUS, NULL, &back));
    printf("own-handler %s\n", back.sa_sigaction == on_bus ? "yes" : "no");
    raise(SIGBUS); /* sent: its handler, once */

    char path[] = "/tmp/locksuit-cut-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0 || ftruncate(fd, 4096) != 0)
        return 3;
    unlink(path);
    volatile char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (page == MAP_FAILED)
        return 3;
    if (ftruncate(fd, 0) != 0)
        return 3;
    if (!sigsetjmp(out_of_fault, 1))
        page[0] = 1; /* a fault of its own: its handler, once more */
    printf("handled %d\n", (int)handled);
    locks_then_cut();
    printf("handled %d\n", (int)handled);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    printf("mode %s\n", mode);
    fflush(stdout);
    if (!strcmp(mode, "cut")) {
        locks_then_cut();
        return 0;
    }
    if (!strcmp(mode, "handler"))
        return own_handler();
    if (!strcmp(mode, "default")) {
        raise(SIGBUS);
        return 0;
    }
    fprintf(stderr, "usage: cut_trace cut|handler|default\n");
    return 2;
}
