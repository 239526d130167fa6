"""Python threading.Lock and queue.Queue with known counts.

Part 1: WORKERS threads each acquire and release one threading.Lock exactly
N times (``with lock:``). In CPython up to 3.12 a Lock is a POSIX semaphore:
acquire() is a sem_trywait and, only if that fails, a sem_wait; release() is
a sem_post.

Part 2: one producer thread puts ITEMS items on a queue.Queue, one consumer
thread gets them. The queue's mutex is a Lock shared by the two threads; when
the consumer finds the queue empty it waits on a Condition, which blocks on a
fresh Lock that the producer's notify() releases (a sem_post in one thread
ending a sem_wait in another).

Only the producer and the consumer touch the queue (main never calls a
queue method), so its mutex is engaged by exactly two threads. All output is
printed by the main thread after the threads are joined, so it is the same
on every run.
"""
import queue
import sys
import threading

WORKERS = 3
N = 1000
ITEMS = 500

lock = threading.Lock()
counter = 0


def locker():
    global counter
    for _ in range(N):
        with lock:
            counter += 1


def producer(q):
    for i in range(ITEMS):
        q.put(i * 7)
    q.put(None)


def consumer(q, out):
    total = 0
    count = 0
    while True:
        item = q.get()
        if item is None:
            break
        total += item
        count += 1
    out.append((count, total))


def main():
    print(f"workers {WORKERS}")
    print(f"n {N}")
    print(f"items {ITEMS}")

    threads = [threading.Thread(target=locker, name=f"locker-{i}")
               for i in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"counter {counter}")

    q = queue.Queue()
    out = []
    c = threading.Thread(target=consumer, args=(q, out), name="consumer")
    p = threading.Thread(target=producer, args=(q,), name="producer")
    c.start()
    p.start()
    p.join()
    c.join()
    count, total = out[0]
    print(f"consumed {count}")
    print(f"total {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
