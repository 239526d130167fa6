/* Locks inside structs in a shared library (struct_names_lib.c) and in the
 * program: both named by their paths. Prints the lines struct_names.c
 * does ("lock <address> <path> <variable> <size> <lock size>"). */
#include "common.h"

void lib_init(void);
void lib_take(int print);

struct pair {
    pthread_mutex_t first;
    pthread_mutex_t second;
};
static struct pair pairs[2];

static void *worker(void *arg)
{
    (void)arg;
    lib_take(0);
    return NULL;
}

int main(void)
{
    lib_init();
    CHECK(pthread_mutex_init(&pairs[1].first, NULL));
    pthread_t t;
    CHECK(pthread_create(&t, NULL, worker, NULL));
    CHECK(pthread_join(t, NULL));
    lib_take(1);
    CHECK(pthread_mutex_lock(&pairs[1].first));
    CHECK(pthread_mutex_unlock(&pairs[1].first));
    printf("lock %p &pairs[1].first %p %zu 40\n", (void *)&pairs[1].first, (void *)pairs,
           sizeof pairs);
    return 0;
}
