/* A program that waits to be stopped by a signal, for `locksuit run`'s
 * signal forwarding.
 *
 *   until_signal   takes a lock (so its trace has something in it), prints
 *                  "ready <pid>", then waits up to 30 s. SIGTERM is caught:
 *                  it prints "got SIGTERM" and exits 7. Any other signal
 *                  has its default action. Exits 3 if nothing came. */
#include "common.h"

#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile sig_atomic_t got_term;

static void on_term(int sig)
{
    (void)sig;
    got_term = 1;
}

int main(void)
{
    catch_sigterm(on_term);
    CHECK(pthread_mutex_lock(&lock));
    CHECK(pthread_mutex_unlock(&lock));
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    for (int i = 0; i < 3000 && !got_term; i++)
        sleep_ms(10);
    if (got_term) {
        printf("got SIGTERM\n");
        return 7;
    }
    return 3;
}
