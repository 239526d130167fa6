/* A shared library whose globals hold locks inside structs (see
 * struct_names_main.c): its variables are named by their paths too, at
 * whatever address the library was loaded. */
#include "common.h"

struct slot {
    long hits;
    pthread_mutex_t m;
};

/* One exported, one the library's own. */
struct slot lib_slots[3];
static struct {
    char name[24];
    pthread_mutex_t locks[2];
} lib_private;

static void show(const void *lock, const char *path, const void *var, size_t var_size)
{
    printf("lock %p %s %p %zu 40\n", lock, path, var, var_size);
}

/* Takes each lock once; prints them when `print`. */
void lib_take(int print)
{
    static pthread_mutex_t lib_counted = PTHREAD_MUTEX_INITIALIZER;
    CHECK(pthread_mutex_lock(&lib_slots[2].m));
    lib_slots[2].hits++;
    CHECK(pthread_mutex_unlock(&lib_slots[2].m));
    CHECK(pthread_mutex_lock(&lib_private.locks[1]));
    CHECK(pthread_mutex_unlock(&lib_private.locks[1]));
    CHECK(pthread_mutex_lock(&lib_counted));
    CHECK(pthread_mutex_unlock(&lib_counted));
    if (print) {
        show(&lib_slots[2].m, "&lib_slots[2].m", lib_slots, sizeof lib_slots);
        show(&lib_private.locks[1], "&lib_private.locks[1]", &lib_private, sizeof lib_private);
        show(&lib_counted, "&lib_take::lib_counted", &lib_counted, sizeof lib_counted);
    }
}

void lib_init(void)
{
    for (int i = 0; i < 3; i++)
        CHECK(pthread_mutex_init(&lib_slots[i].m, NULL));
    for (int i = 0; i < 2; i++)
        CHECK(pthread_mutex_init(&lib_private.locks[i], NULL));
}
