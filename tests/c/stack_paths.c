/* One lock call reached by call paths with very different stacks: first
 * through a function with a 60 KB frame (the shim learns where the callers'
 * return addresses sit on that path), then from a coroutine on a 16 KB stack
 * with nothing mapped above it. The shim must not read the first path's
 * offsets on the second one. Prints "ok" and the number of lock calls. */
#define _GNU_SOURCE
#include "common.h"

#include <sys/mman.h>
#include <ucontext.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int calls;

__attribute__((noinline)) static void take(void)
{
    CHECK(pthread_mutex_lock(&m)); /* @take */
    calls++;
    CHECK(pthread_mutex_unlock(&m));
    __asm__ volatile("");
}

__attribute__((noinline)) static void big_frame(void)
{
    volatile char buf[60000];
    buf[0] = 1;
    take();
    buf[1] = buf[0];
}

__attribute__((noinline)) static void via_big_frame(void)
{
    big_frame();
    __asm__ volatile("");
}

static ucontext_t main_context, coroutine;

static void coroutine_body(void)
{
    take();
    take();
}

int main(void)
{
    via_big_frame();
    via_big_frame();
    size_t size = 16384;
    char *stack = mmap(NULL, size + (1 << 20), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (stack == MAP_FAILED)
        return 1;
    munmap(stack + size, 1 << 20); /* nothing mapped right above the stack */
    CHECK(getcontext(&coroutine));
    coroutine.uc_stack.ss_sp = stack;
    coroutine.uc_stack.ss_size = size;
    coroutine.uc_link = &main_context;
    makecontext(&coroutine, coroutine_body, 0);
    CHECK(swapcontext(&main_context, &coroutine));
    printf("ok %d\n", calls);
    return 0;
}
