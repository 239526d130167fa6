// abseil's absl::Mutex (exclusive and shared) and absl::CondVar, each made
// to wait inside a critical section: a holder takes the lock, starts its
// waiter, holds on until the waiter is seen blocked in futex(2), then for
// HOLD_MS more, and lets go. Each waiter times its own wait, each holder how
// long it held on after it saw its waiters blocked; every line is
// `key value`.
//
// abseil parks a waiting thread on a futex word of its own (its
// per-thread semaphore), so every waiter stays alive, asleep, to the end:
// a later thread could be given the same per-thread data.

#include <absl/synchronization/mutex.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace {

using Clock = std::chrono::steady_clock;
constexpr int HOLD_MS = 150;

absl::Mutex mutex_lock;
absl::Mutex rw_lock;
absl::Mutex ready_lock;
absl::CondVar ready_cv;
bool ready = false;
long counter = 0;
std::atomic<bool> done{false};
std::vector<std::thread> lingering;

long ns_since(Clock::time_point start)
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
}

int tid() { return static_cast<int>(syscall(SYS_gettid)); }

void sleep_us(long us) { std::this_thread::sleep_for(std::chrono::microseconds(us)); }

bool in_futex(int t)
{
    char path[64];
    std::snprintf(path, sizeof path, "/proc/self/task/%d/syscall", t);
    FILE *f = std::fopen(path, "r");
    if (!f)
        return false;
    long nr = -1;
    int got = std::fscanf(f, "%ld", &nr);
    std::fclose(f);
    return got == 1 && nr == SYS_futex;
}

// A waiter: its tid (once it is about to wait), the wait it measured.
struct Waiter {
    std::atomic<int> about{0};
    std::atomic<long> waited{0};
    std::atomic<bool> finished{false};

    // Returns once the waiter is blocked in futex(2).
    void until_waiting()
    {
        while (about.load() == 0)
            sleep_us(200);
        while (!in_futex(about.load()))
            sleep_us(200);
    }

    void report(const char *key)
    {
        while (!finished.load())
            sleep_us(200);
        std::printf("%s_tid %d\n%s_wait_ns %ld\n", key, about.load(), key, waited.load());
    }
};

// Starts thread `name` running `wait` (which says it is about to wait and
// returns the ns it waited), then sleeping until the program ends.
template <typename F> void spawn_waiter(Waiter &w, const char *name, F wait)
{
    lingering.emplace_back([&w, name, wait] {
        pthread_setname_np(pthread_self(), name);
        w.waited.store(wait(w));
        w.finished.store(true);
        while (!done.load())
            sleep_us(1000);
    });
}

// Runs `body` on a thread named `name` and joins it.
template <typename F> void on_thread(const char *name, F body)
{
    std::thread t([name, body] {
        pthread_setname_np(pthread_self(), name);
        body();
    });
    t.join();
}

long timed_wait(Waiter &w, absl::Mutex &mu, bool shared)
{
    w.about.store(tid());
    auto start = Clock::now();
    if (shared)
        mu.ReaderLock(); // marker: readers wait
    else if (&mu == &mutex_lock)
        mu.Lock(); // marker: mutex waiter
    else
        mu.Lock(); // marker: writer waits
    long waited = ns_since(start);
    if (shared)
        mu.ReaderUnlock();
    else
        mu.Unlock();
    return waited;
}

void mutex_phase()
{
    on_thread("m_holder", [] {
        static Waiter w;
        mutex_lock.Lock();
        spawn_waiter(w, "m_waiter", [](Waiter &w) { return timed_wait(w, mutex_lock, false); });
        w.until_waiting();
        auto seen = Clock::now();
        sleep_us(HOLD_MS * 1000);
        counter++;
        std::printf("mutex_held_ns %ld\n", ns_since(seen));
        mutex_lock.Unlock(); // marker: mutex holder unlocks
        std::printf("mutex_holder_tid %d\n", tid());
        w.report("mutex_waiter");
    });
}

void readers_wait_phase()
{
    on_thread("rw_writer", [] {
        static Waiter readers[2];
        rw_lock.Lock();
        spawn_waiter(readers[0], "rw_reader1", [](Waiter &w) { return timed_wait(w, rw_lock, true); });
        spawn_waiter(readers[1], "rw_reader2", [](Waiter &w) { return timed_wait(w, rw_lock, true); });
        readers[0].until_waiting();
        readers[1].until_waiting();
        auto seen = Clock::now();
        sleep_us(HOLD_MS * 1000);
        std::printf("rw_held_ns %ld\n", ns_since(seen));
        rw_lock.Unlock(); // marker: writer unlocks
        std::printf("rw_writer_tid %d\n", tid());
        readers[0].report("rw_reader1");
        readers[1].report("rw_reader2");
    });
}

void writer_waits_phase()
{
    on_thread("wr_reader", [] {
        static Waiter w;
        rw_lock.ReaderLock();
        spawn_waiter(w, "wr_writer", [](Waiter &w) { return timed_wait(w, rw_lock, false); });
        w.until_waiting();
        auto seen = Clock::now();
        sleep_us(HOLD_MS * 1000);
        std::printf("wr_held_ns %ld\n", ns_since(seen));
        rw_lock.ReaderUnlock(); // marker: reader unlocks
        std::printf("wr_reader_tid %d\n", tid());
        w.report("wr_writer");
    });
}

void condvar_phase()
{
    static Waiter w;
    spawn_waiter(w, "c_waiter", [](Waiter &w) {
        ready_lock.Lock();
        w.about.store(tid());
        auto start = Clock::now();
        while (!ready)
            ready_cv.Wait(&ready_lock); // marker: condvar wait
        long waited = ns_since(start);
        ready_lock.Unlock();
        return waited;
    });
    on_thread("c_notifier", [] {
        w.until_waiting();
        auto seen = Clock::now();
        sleep_us(HOLD_MS * 1000);
        ready_lock.Lock();
        ready = true;
        ready_lock.Unlock();
        std::printf("condvar_held_ns %ld\n", ns_since(seen));
        ready_cv.Signal(); // marker: condvar notify
        std::printf("condvar_notifier_tid %d\n", tid());
    });
    w.report("condvar_waiter");
}

} // namespace

int main()
{
    setvbuf(stdout, nullptr, _IOLBF, 0);
    mutex_phase();
    readers_wait_phase();
    writer_waits_phase();
    condvar_phase();
    std::printf("mutex_count %ld\n", counter);
    done.store(true);
    for (auto &t : lingering)
        t.join();
    return 0;
}
