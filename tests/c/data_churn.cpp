// Heap churn under a lock, built with `locksuit c++`: four threads make
// short-lived strings (allocated and freed again and again, at the same
// addresses) and keep the last fifty in a shared vector under one mutex.
// The instrumented build's allocation calls go through liblocksuit_cov.so;
// it must run as it always did, with the shim or without.
//
// Prints "kept N" (the vector's final size).
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

static std::mutex kept_lock;
static std::vector<std::string> kept;

int main()
{
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; t++)
        threads.emplace_back([t] {
            for (int k = 0; k < 1000; k++) {
                std::string s(100, static_cast<char>('a' + t));
                std::lock_guard<std::mutex> held(kept_lock);
                kept.push_back(s);
                if (kept.size() > 50)
                    kept.clear();
            }
        });
    for (auto &t : threads)
        t.join();
    std::printf("kept %zu\n", kept.size());
    return 0;
}
