/* One lock whose contention is set by a knob: KNOB_CONTENDED=k (default
 * 10). main takes `knob_lock` 100 times at contend(); for the first k of
 * them a helper thread takes it first and holds it for 20 ms, so exactly k
 * of main's acquisitions wait, about 20 ms each. The two threads hand the
 * turn over through pipes, which are not locks: the lock's counts are
 * exact, whatever the machine's load.
 *
 * Prints "contended K". */
#include "common.h"

static pthread_mutex_t knob_lock = PTHREAD_MUTEX_INITIALIZER;
static int go_pipe[2], held_pipe[2];
static int contended = 10;

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
        sleep_ms(20);
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
    CHECK(pthread_mutex_lock(&knob_lock));
    CHECK(pthread_mutex_unlock(&knob_lock));
}

int main(void)
{
    const char *knob = getenv("KNOB_CONTENDED");
    if (knob)
        contended = atoi(knob);
    if (contended < 0 || contended > 100 || pipe(go_pipe) != 0 || pipe(held_pipe) != 0)
        return 2;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, helper, NULL));
    for (int i = 0; i < 100; i++)
        contend(i);
    CHECK(pthread_join(t, NULL));
    printf("contended %d\n", contended);
    return 0;
}
