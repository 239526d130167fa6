// C++ standard library synchronisation on top of pthreads, with known counts.
//
//   std::mutex m          MUTEX_THREADS std::threads x MUTEX_ITERS lock_guard;
//                         nothing else touches it (no condition variable).
//   std::shared_mutex sm  SHARED_READERS x READ_ITERS shared_lock,
//                         SHARED_WRITERS x WRITE_ITERS unique_lock (all
//                         concurrently), then main: one try_lock_shared and
//                         one try_lock on the free mutex (both succeed).
//   std::condition_variable cv with its own mutex hm: ping and pong hand a
//                         turn back and forth HANDSHAKES times each.
//
// stdout: results that do not depend on timing (same with and without the
// shim). stderr: "addr <name> <pointer>" lines (ASLR changes them per run).
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

constexpr int MUTEX_THREADS = 4;
constexpr int MUTEX_ITERS = 5000;
constexpr int SHARED_READERS = 3;
constexpr int READ_ITERS = 3000;
constexpr int SHARED_WRITERS = 2;
constexpr int WRITE_ITERS = 1500;
constexpr int HANDSHAKES = 200;

static std::mutex m;
static long m_count;

static std::shared_mutex sm;
static long sm_value;
static long sm_reads[SHARED_READERS];

static std::mutex hm;
static std::condition_variable cv;
static int turn;          // 0: ping's turn, 1: pong's turn; under hm
static long ping_sum, pong_sum;

void mutex_worker(int index)
{
    (void)index;
    for (int i = 0; i < MUTEX_ITERS; i++) {
        std::lock_guard<std::mutex> g(m); // @mutex-lock
        m_count++;
    }
}

void shared_reader(int index)
{
    long seen = 0;
    for (int i = 0; i < READ_ITERS; i++) {
        std::shared_lock<std::shared_mutex> g(sm); // @shared-read
        seen += sm_value >= 0;
    }
    sm_reads[index] = seen;
}

void shared_writer(int index)
{
    (void)index;
    for (int i = 0; i < WRITE_ITERS; i++) {
        std::unique_lock<std::shared_mutex> g(sm); // @shared-write
        sm_value++;
    }
}

void ping()
{
    for (int i = 0; i < HANDSHAKES; i++) {
        std::unique_lock<std::mutex> lk(hm); // @ping-lock
        cv.wait(lk, [] { return turn == 0; }); // @ping-wait
        turn = 1;
        ping_sum += i;
        cv.notify_one(); // @ping-notify
    }
}

void pong()
{
    for (int i = 0; i < HANDSHAKES; i++) {
        std::unique_lock<std::mutex> lk(hm); // @pong-lock
        cv.wait(lk, [] { return turn == 1; }); // @pong-wait
        turn = 0;
        pong_sum += i;
        cv.notify_one(); // @pong-notify
    }
}

int main()
{
    std::fprintf(stderr, "addr m %p\n", (void *)&m);
    std::fprintf(stderr, "addr sm %p\n", (void *)&sm);
    std::fprintf(stderr, "addr hm %p\n", (void *)&hm);
    std::fprintf(stderr, "addr cv %p\n", (void *)&cv);

    std::vector<std::thread> ts;
    for (int i = 0; i < MUTEX_THREADS; i++)
        ts.emplace_back(mutex_worker, i);
    for (auto &t : ts)
        t.join();
    ts.clear();
    std::printf("mutex-count %ld\n", m_count);

    for (int i = 0; i < SHARED_READERS; i++)
        ts.emplace_back(shared_reader, i);
    for (int i = 0; i < SHARED_WRITERS; i++)
        ts.emplace_back(shared_writer, i);
    for (auto &t : ts)
        t.join();
    ts.clear();
    long reads = 0;
    for (long r : sm_reads)
        reads += r;
    std::printf("shared-reads %ld\n", reads);
    std::printf("shared-value %ld\n", sm_value);
    bool rd = sm.try_lock_shared(); // @shared-try-read
    std::printf("try-lock-shared %d\n", rd ? 1 : 0);
    if (rd)
        sm.unlock_shared();
    bool wr = sm.try_lock(); // @shared-try-write
    std::printf("try-lock %d\n", wr ? 1 : 0);
    if (wr)
        sm.unlock();

    std::thread a(ping), b(pong);
    a.join();
    b.join();
    std::printf("handshakes %d\n", HANDSHAKES);
    std::printf("ping-sum %ld\n", ping_sum);
    std::printf("pong-sum %ld\n", pong_sum);
    std::printf("turn %d\n", turn);
    return 0;
}
