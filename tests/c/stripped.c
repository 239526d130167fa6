/* A static function that takes a lock, in a binary that will be stripped
 * (only exported symbols left): the report must not name the lock's line
 * after the nearest exported symbol below it.
 *
 * Output: "n 10". */
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long n;

__attribute__((noinline)) static void bump(void)
{
    pthread_mutex_lock(&m); /* @bump-lock */
    n++;
    pthread_mutex_unlock(&m);
}

/* Exported (-rdynamic): its symbol stays after stripping. */
int exported_helper(int x)
{
    return x * 2;
}

int main(void)
{
    for (int i = 0; i < 10; i++)
        bump();
    printf("n %ld\n", n + exported_helper(0));
    return 0;
}
