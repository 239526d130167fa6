/* Two threads take two mutexes in opposite orders and deadlock (a barrier
 * makes sure each holds its first before asking for its second). Prints
 * each thread's tid and the mutexes' addresses, then "hung"; the main
 * thread waits forever in join: a test attaches to the hung process and
 * kills it. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t b = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t both;

static void *first_a(void *arg) {
    (void)arg;
    printf("tid-ab %ld\n", (long)syscall(SYS_gettid));
    pthread_mutex_lock(&a);
    pthread_barrier_wait(&both);
    pthread_mutex_lock(&b); /* deadlock-b */
    return NULL;
}

static void *first_b(void *arg) {
    (void)arg;
    printf("tid-ba %ld\n", (long)syscall(SYS_gettid));
    pthread_mutex_lock(&b);
    pthread_barrier_wait(&both);
    pthread_mutex_lock(&a); /* deadlock-a */
    return NULL;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("mutex-a %p\nmutex-b %p\n", (void *)&a, (void *)&b);
    pthread_barrier_init(&both, NULL, 2);
    pthread_t t1, t2;
    pthread_create(&t1, NULL, first_a, NULL);
    pthread_create(&t2, NULL, first_b, NULL);
    printf("hung\n");
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    return 0;
}
