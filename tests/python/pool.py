"""A ThreadPoolExecutor's workers take the program's lock; then a thread
waits on a queue.SimpleQueue that the main thread feeds late.

What the report must not say: that the executor's module-level lock,
made as `concurrent.futures` was imported and taken by the main thread
alone in `submit`, can go (it is the library's); that the SimpleQueue's
lock is contended (its waits are waits for work: the main thread posts
it, the consumer takes it). What it must say: the `with lock:` line's
engagements are the tasks. The `# marker:` comments name the lines."""
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor  # marker: import

TASKS = 2000
lock = threading.Lock()
total = 0


def task(i):
    global total
    s = sum(range(200))
    with lock:  # marker: take
        total += s
    return s


with ThreadPoolExecutor(max_workers=4) as ex:
    results = list(ex.map(task, range(TASKS)))

items = queue.SimpleQueue()  # marker: queue
got = []


def consume():
    for _ in range(5):
        got.append(items.get())  # marker: get


consumer = threading.Thread(target=consume)
consumer.start()
for i in range(5):
    time.sleep(0.02)
    items.put(i)
consumer.join()
print(f"tasks {len(results)} total {total} got {len(got)}")
