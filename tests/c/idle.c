/* Processors idle while threads wait. "serial": two threads take turns on
 * one mutex, each spinning 40 ms while holding it, four turns each: while
 * one works the other waits, so one processor's worth of work runs at a
 * time. "parallel": two threads spin 150 ms each with no lock at all, while
 * main waits to join them.
 *
 * Arguments: serial | parallel. */
#include "common.h"

static pthread_mutex_t turn = PTHREAD_MUTEX_INITIALIZER;

static void *serial(void *arg)
{
    (void)arg;
    for (int i = 0; i < 4; i++) {
        CHECK(pthread_mutex_lock(&turn)); /* marker: serial lock */
        spin_ms(40);
        CHECK(pthread_mutex_unlock(&turn));
        sched_yield();
    }
    return NULL;
}

static void *parallel(void *arg)
{
    (void)arg;
    spin_ms(150);
    return NULL;
}

int main(int argc, char **argv)
{
    int is_serial = argc > 1 && !strcmp(argv[1], "serial");
    pthread_t a, b;
    CHECK(pthread_create(&a, NULL, is_serial ? serial : parallel, NULL));
    CHECK(pthread_create(&b, NULL, is_serial ? serial : parallel, NULL));
    CHECK(pthread_join(a, NULL));
    CHECK(pthread_join(b, NULL));
    puts("done");
    return 0;
}
