/* One lock whose contention is set by a knob: KNOB_CONTENDED=k (default
 * 10). main takes `knob_lock` 100 times at contend(); for the first k of
 * them a helper thread takes it first and holds it for 20 ms, so exactly k
 * of main's acquisitions wait, about 20 ms each. The two threads hand the
 * turn over through pipes, which are not locks: the lock's counts are
 * exact, whatever the machine's load. KNOB_HOLD_MS=m (default 20) sets
 * the helper's hold: the whole run slows down with it, as on a slower
 * machine.
 *
 * Prints "contended K", then "waited_us W": how long main itself measured
 * its lock calls to take, in all. */
#include "common.h"

static pthread_mutex_t knob_lock = PTHREAD_MUTEX_INITIALIZER;
static int go_pipe[2], held_pipe[2];
static int contended = 10;
static int hold_ms = 20;
static long long waited_ns;

static void *helper(void *arg)
{
    (void)arg;
    char c;
    for (int i = 0; i < contended; i++) {
        if (read(go_pipe[0], &c, 1) != 1)
            exit(3);
        CHECK(pthread_mutex_lock(&knob_lock));
        if (write(held_pipe[1], "h", 1) != 1)
            exit(3);
        sleep_ms(hold_ms);
        CHECK(pthread_mutex_unlock(&knob_lock));
    }
    return NULL;
}

static void contend(int turn)
{
    char c;
    if (turn < contended) {
        if (write(go_pipe[1], "g", 1) != 1 || read(held_pipe[0], &c, 1) != 1)
            exit(3);
    }
    long long asked = now_ns();
    CHECK(pthread_mutex_lock(&knob_lock));
    waited_ns += now_ns() - asked;
    CHECK(pthread_mutex_unlock(&knob_lock));
}

int main(void)
{
    const char *knob = getenv("KNOB_CONTENDED");
    if (knob)
        contended = atoi(knob);
    const char *hold = getenv("KNOB_HOLD_MS");
    if (hold)
        hold_ms = atoi(hold);
    if (contended < 0 || contended > 100 || hold_ms < 0 || hold_ms > 1000 || pipe(go_pipe) != 0 || pipe(held_pipe) != 0)
        return 2;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, helper, NULL));
    for (int i = 0; i < 100; i++)
        contend(i);
    CHECK(pthread_join(t, NULL));
    printf("contended %d\nwaited_us %lld\n", contended, waited_ns / 1000);
    return 0;
}
