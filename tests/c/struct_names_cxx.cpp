// C++ globals holding locks: named from their mangled names (namespaces,
// classes, a function's statics) and their members' names. Prints the
// lines struct_names.c does ("lock|cond <address> <path> ...").
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

namespace store {
struct Shard {
    long hits;
    std::mutex m;
};
Shard shards[4];

class Registry {
  public:
    static std::mutex lock_;
    long n = 0;
    std::mutex own_[2];
};
std::mutex Registry::lock_;
Registry registry;

struct Queue {
    std::mutex m;
    std::condition_variable cv;
    int items = 0;
};
Queue queue;
} // namespace store

static void take(std::mutex &m)
{
    std::lock_guard<std::mutex> hold(m);
}

static std::mutex &counted()
{
    static std::mutex local;
    return local;
}

static void take_all()
{
    take(store::shards[2].m);
    take(store::Registry::lock_);
    take(store::registry.own_[1]);
    take(counted());
    {
        std::lock_guard<std::mutex> hold(store::queue.m);
        store::queue.items++;
        store::queue.cv.notify_one();
    }
}

static void show(const char *what, const void *object, const char *path)
{
    std::printf("%s %p %s\n", what, object, path);
}

int main()
{
    std::thread worker(take_all);
    worker.join();
    take_all();
    show("lock", &store::shards[2].m, "&store::shards[2].m");
    show("lock", &store::Registry::lock_, "&store::Registry::lock_");
    show("lock", &store::registry.own_[1], "&store::registry.own_[1]");
    // A static function has no mangled name in the DWARF: its statics are
    // `function::name`, as in C.
    show("lock", &counted(), "&counted::local");
    show("lock", &store::queue.m, "&store::queue.m");
    show("cond", &store::queue.cv, "&store::queue.cv");
    return 0;
}
