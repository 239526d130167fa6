/* fork while another thread is inside dlopen/dlclose.
 *
 *   fork_dlopen N LIB   a loader thread loops dlopen(LIB)/dlclose; main
 *                       forks N children; each child locks and unlocks a
 *                       mutex and _exits. A child that has not exited after
 *                       10 s is counted as hung and killed (without the
 *                       shim none ever hangs: the child takes no lock the
 *                       loader thread may have held at the fork).
 *
 * Output: "children N", "hung H", "loads L>0". */
#include "common.h"

#include <dlfcn.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

static pthread_mutex_t child_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int stop;
static atomic_long loads;
static const char *lib;

static void *loader(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        if (h) {
            atomic_fetch_add(&loads, 1);
            dlclose(h);
        }
    }
    return NULL;
}

/* Waits up to 10 s for `pid`; 1 if it had to be killed. */
static int hung(pid_t pid)
{
    long long deadline = now_ns() + 10LL * 1000 * 1000 * 1000;
    int status;
    while (now_ns() < deadline) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            return !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        usleep(200);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return 1;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 200;
    lib = argc > 2 ? argv[2] : "libm.so.6";
    pthread_t t;
    CHECK(pthread_create(&t, NULL, loader, NULL));
    while (atomic_load(&loads) == 0)
        usleep(100);
    int hangs = 0;
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            CHECK(pthread_mutex_lock(&child_lock)); /* @child-lock */
            CHECK(pthread_mutex_unlock(&child_lock));
            _exit(0);
        }
        if (pid < 0)
            return 1;
        hangs += hung(pid);
    }
    atomic_store(&stop, 1);
    CHECK(pthread_join(t, NULL));
    printf("children %d\n", n);
    printf("hung %d\n", hangs);
    printf("loads %d\n", atomic_load(&loads) > 0);
    return 0;
}
