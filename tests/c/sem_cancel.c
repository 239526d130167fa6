/* sem_wait is a cancellation point even when a token is available: a
 * thread with a pending cancel request must be cancelled, not take the
 * token. Prints whether the thread was cancelled and the semaphore value. */
#include "common.h"

#include <semaphore.h>

static sem_t sem;

static void *waiter(void *arg)
{
    (void)arg;
    int old;
    CHECK(pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old));
    CHECK(pthread_cancel(pthread_self()));
    CHECK(pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old));
    sem_wait(&sem); /* the pending cancel acts here */
    return (void *)1;
}

int main(void)
{
    CHECK(sem_init(&sem, 0, 1));
    pthread_t t;
    void *result;
    CHECK(pthread_create(&t, NULL, waiter, NULL));
    CHECK(pthread_join(t, &result));
    int value;
    sem_getvalue(&sem, &value);
    printf("cancelled %d value %d\n", result == PTHREAD_CANCELED, value);
    return 0;
}
