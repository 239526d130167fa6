/* Ground truth for suppressions: a program that looks like CPython to the
 * built-in suppressions (its binary is python3_lookalike, a module name
 * python3*; one of its locks lives in a global named _PyRuntime, as
 * CPython's GIL does) and has a lock of its own.
 *
 * The main thread alone takes each lock ITER times: one
 * single-thread-lock finding each, &_PyRuntime.ceval.gil.mutex at
 * take_gil and &user_lock at user_work.
 *
 * Output: "counter <value>" (2 * ITER). */
#include "common.h"

#define ITER 2000

struct gil {
    pthread_mutex_t mutex;
};
struct ceval {
    struct gil gil;
};
struct runtime {
    struct ceval ceval;
};

struct runtime _PyRuntime = {{{PTHREAD_MUTEX_INITIALIZER}}};
static pthread_mutex_t user_lock = PTHREAD_MUTEX_INITIALIZER;
static long counter;

__attribute__((noinline)) void take_gil(void)
{
    for (int i = 0; i < ITER; i++) {
        CHECK(pthread_mutex_lock(&_PyRuntime.ceval.gil.mutex)); /* @gil */
        counter++;
        CHECK(pthread_mutex_unlock(&_PyRuntime.ceval.gil.mutex));
    }
}

__attribute__((noinline)) void user_work(void)
{
    for (int i = 0; i < ITER; i++) {
        CHECK(pthread_mutex_lock(&user_lock)); /* @user */
        counter++;
        CHECK(pthread_mutex_unlock(&user_lock));
    }
}

int main(void)
{
    take_gil();
    user_work();
    printf("counter %ld\n", counter);
    return 0;
}
