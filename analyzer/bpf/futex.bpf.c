// SPDX-License-Identifier: MIT OR Apache-2.0
// `locksuit attach`: every futex call of one process, seen from the kernel.
//
// The futex system call's tracepoints (syscalls:sys_enter_futex and
// sys_exit_futex, run by futex calls only; user space finds them in
// tracefs) keep, per thread of the target process, what a futex call was
// made with (time, word, operation, the user registers and a copy of the
// top of the user stack); its exit sends that with the exit time and
// return value to user space through a ring buffer. Where they cannot be
// found, raw_syscalls' sys_enter/sys_exit raw tracepoints (no tracefs
// needed, but run by every system call of the machine) do the same. The
// analyzer unwinds the stack copy with the modules' call frame information,
// as it does the shim's snapshots.
//
// With `--locks`, uprobes on the C library's pthread_mutex_lock, _trylock,
// _unlock and pthread_cond_wait/_timedwait add every acquisition of a
// pthread mutex, per mutex and calling line (the return address), with its
// hold time (from the lock call's return to the unlock call; a condition
// wait ends the hold and its return starts another). A uprobe stops the
// thread in the kernel at every such call: documented as costly.
//
// The sched_switch raw tracepoint adds why the process's threads were off
// their CPU: at a switch away from one of them, whether it was preempted
// (still runnable), in a futex call (the `inflight` map), or asleep
// (interruptible: sleeps, polls, pipes, sockets) or uninterruptible (disk,
// page faults) by the state it leaves in; when the same task is switched
// back in (found by its task pointer), the period is added to its figures
// for that reason. Whether a switched-in task is the target's is read
// from its task_struct, at the offset the running kernel's BTF gives
// (a CO-RE relocation aya makes at load); where that read is not seen to
// give the right process (no BTF), every switched-in task is looked up.
//
// Built by analyzer/build.rs with clang -target bpf; no libbpf or kernel
// headers are needed: the few helpers, constants and map macros, and the
// one field of task_struct, are declared here.

typedef unsigned char __u8;
typedef unsigned int __u32;
typedef int __s32;
typedef unsigned long long __u64;
typedef long long __s64;

#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name

#define BPF_MAP_TYPE_HASH 1
#define BPF_MAP_TYPE_ARRAY 2
#define BPF_MAP_TYPE_PERCPU_ARRAY 6
#define BPF_MAP_TYPE_RINGBUF 27
#define BPF_ANY 0

static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value,
                                   __u64 flags) = (void *)2;
static long (*bpf_map_delete_elem)(void *map, const void *key) = (void *)3;
static __u64 (*bpf_ktime_get_ns)(void) = (void *)5;
static __u64 (*bpf_get_current_pid_tgid)(void) = (void *)14;
static long (*bpf_probe_read_user)(void *dst, __u32 size, const void *src) = (void *)112;
static long (*bpf_probe_read_kernel)(void *dst, __u32 size, const void *src) = (void *)113;
static long (*bpf_ringbuf_output)(void *ringbuf, void *data, __u64 size, __u64 flags) = (void *)130;
static void *(*bpf_get_current_task_btf)(void) = (void *)158;
static void *(*bpf_task_pt_regs)(void *task) = (void *)175;

// x86_64 only: the futex system call's number and struct pt_regs offsets.
#define NR_FUTEX 202
#define REGS_BP 32
#define REGS_AX 80
#define REGS_SI 104
#define REGS_DI 112
#define REGS_ORIG_AX 120
#define REGS_IP 128
#define REGS_SP 152

// Bytes of user stack copied from the stack pointer; a shorter copy when
// the stack ends sooner (the main thread's, near its top).
#define STACK_BYTES 8192
#define SHORT_STACK_BYTES 1024

// Keep in step with analyzer/src/commands/attach/events.rs (`Event`).
struct event {
    __u64 enter_ns;
    __u64 exit_ns;
    __u64 uaddr;
    __u64 ip;
    __u64 sp;
    __u64 bp;
    __s64 ret;
    __u32 tid;
    __u32 op;
    __u32 stack_len;
    __u32 pad;
    // With --locks: the return address of the probed mutex call or
    // condition wait this futex call is made in, which the uretprobe
    // replaced on the user stack with its trampoline's (0: none).
    __u64 probed_ret;
    __u8 stack[STACK_BYTES];
};

// Keep in step with attach/bpf.rs: [CONFIG_TARGET] the target process,
// set by user space; [CONFIG_TGID_CHECK] whether reading a task's process
// from the task gave the process's id (checked once, on a target task).
#define CONFIG_TARGET 0
#define CONFIG_TGID_CHECK 1
#define TGID_UNCHECKED 0
#define TGID_READ_RIGHT 1
#define TGID_READ_WRONG 2
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 2);
    __type(key, __u32);
    __type(value, __u32);
} config SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct event);
} scratch SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 65536);
    __type(key, __u32);
    __type(value, struct event);
} inflight SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, 64 << 20);
} events SEC(".maps");

// --locks: a mutex call in flight (lock, trylock or condition wait), per
// thread.
struct lock_call {
    __u64 mutex;
    __u64 ret;       // the caller's return address: its line
    __u64 held_ret;  // a condition wait: the line its hold began at
};

// Per mutex and line. Keep in step with analyzer/src/commands/attach/bpf.rs.
struct lock_key {
    __u64 mutex;
    __u64 ret;
    __u32 tid;
    __u32 pad;
};

struct lock_stats {
    __u64 acquisitions;
    __u64 hold_ns;
    __u64 holds;
    __u64 max_hold_ns;
};

struct held_key {
    __u64 mutex;
    __u32 tid;
    __u32 pad;
};

struct held_since {
    __u64 since;
    __u64 ret;
};

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 65536);
    __type(key, __u32);
    __type(value, struct lock_call);
} lock_calls SEC(".maps");

static __u64 reg(void *regs, int offset) {
    __u64 value = 0;
    bpf_probe_read_kernel(&value, sizeof(value), (char *)regs + offset);
    return value;
}

// Whether the calling thread belongs to the target process.
static int is_target(__u64 pid_tgid) {
    __u32 zero = 0;
    __u32 *tgid = bpf_map_lookup_elem(&config, &zero);
    return tgid && *tgid != 0 && (pid_tgid >> 32) == *tgid;
}

// Keeps what a futex call of a target thread was made with (`regs`: the
// thread's user registers), until it returns.
static __attribute__((always_inline)) int enter_futex(__u64 pid_tgid, void *regs, __u64 uaddr,
                                                      __u32 op) {
    __u32 zero = 0;
    struct event *e = bpf_map_lookup_elem(&scratch, &zero);
    if (!e)
        return 0;
    e->tid = (__u32)pid_tgid;
    e->uaddr = uaddr;
    e->op = op;
    e->ip = reg(regs, REGS_IP);
    e->sp = reg(regs, REGS_SP);
    e->bp = reg(regs, REGS_BP);
    e->exit_ns = 0;
    e->ret = 0;
    e->pad = 0;
    struct lock_call *probed = bpf_map_lookup_elem(&lock_calls, &e->tid);
    e->probed_ret = probed ? probed->ret : 0;
    e->stack_len = STACK_BYTES;
    if (bpf_probe_read_user(e->stack, STACK_BYTES, (void *)e->sp) != 0) {
        e->stack_len = SHORT_STACK_BYTES;
        if (bpf_probe_read_user(e->stack, SHORT_STACK_BYTES, (void *)e->sp) != 0)
            e->stack_len = 0;
    }
    // Last, so the time of the wait does not include the stack copy.
    e->enter_ns = bpf_ktime_get_ns();
    bpf_map_update_elem(&inflight, &e->tid, e, BPF_ANY);
    return 0;
}

// Sends a target thread's futex call, now returned with `ret`, to user
// space.
static __attribute__((always_inline)) int exit_futex(__u64 pid_tgid, __s64 ret) {
    __u64 now = bpf_ktime_get_ns();
    __u32 tid = (__u32)pid_tgid;
    struct event *e = bpf_map_lookup_elem(&inflight, &tid);
    if (!e)
        return 0;
    e->exit_ns = now;
    e->ret = ret;
    // Waits always; other operations (wakes, requeues) only when they woke
    // or moved a thread.
    __u32 cmd = e->op & 127;
    int wait = cmd == 0 || cmd == 6 || cmd == 9 || cmd == 11 || cmd == 13;
    if (!wait && e->ret <= 0) {
        bpf_map_delete_elem(&inflight, &tid);
        return 0;
    }
    bpf_ringbuf_output(&events, e, sizeof(*e), 0);
    bpf_map_delete_elem(&inflight, &tid);
    return 0;
}

// The futex system call's own tracepoints: only futex calls run them.
// Their records, as tracefs's events/syscalls/sys_{enter,exit}_futex/format
// give them (x86_64).
struct futex_enter_args {
    __u64 common;
    __s32 nr;
    __u32 pad;
    __u64 uaddr;
    __u64 op;
    __u64 val;
    __u64 utime;
    __u64 uaddr2;
    __u64 val3;
};

struct futex_exit_args {
    __u64 common;
    __s32 nr;
    __u32 pad;
    __s64 ret;
};

SEC("tracepoint/syscalls/sys_enter_futex")
int futex_call(struct futex_enter_args *args) {
    __u64 pid_tgid = bpf_get_current_pid_tgid();
    if (!is_target(pid_tgid))
        return 0;
    void *regs = bpf_task_pt_regs(bpf_get_current_task_btf());
    return enter_futex(pid_tgid, regs, args->uaddr, (__u32)args->op);
}

SEC("tracepoint/syscalls/sys_exit_futex")
int futex_return(struct futex_exit_args *args) {
    __u64 pid_tgid = bpf_get_current_pid_tgid();
    if (!is_target(pid_tgid))
        return 0;
    return exit_futex(pid_tgid, args->ret);
}

// Where those tracepoints cannot be used (no tracefs to find them by):
// every system call of the machine runs these, up to the first tests.
SEC("raw_tracepoint/sys_enter")
int futex_enter(__u64 *ctx) {
    if (ctx[1] != NR_FUTEX)
        return 0;
    __u64 pid_tgid = bpf_get_current_pid_tgid();
    if (!is_target(pid_tgid))
        return 0;
    void *regs = (void *)ctx[0];
    return enter_futex(pid_tgid, regs, reg(regs, REGS_DI), (__u32)reg(regs, REGS_SI));
}

SEC("raw_tracepoint/sys_exit")
int futex_exit(__u64 *ctx) {
    // The cheapest tests first, the clock only for the target's futex calls.
    __u64 pid_tgid = bpf_get_current_pid_tgid();
    if (!is_target(pid_tgid))
        return 0;
    void *regs = (void *)ctx[0];
    if (reg(regs, REGS_ORIG_AX) != NR_FUTEX)
        return 0;
    return exit_futex(pid_tgid, (__s64)ctx[1]);
}

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 65536);
    __type(key, struct lock_key);
    __type(value, struct lock_stats);
} lock_stats SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 65536);
    __type(key, struct held_key);
    __type(value, struct held_since);
} held SEC(".maps");

// Entries that did not fit a map (65,536 each): the report says so.
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, __u64);
} lock_lost SEC(".maps");

static void lost(void) {
    __u32 zero = 0;
    __u64 *n = bpf_map_lookup_elem(&lock_lost, &zero);
    if (n)
        __sync_fetch_and_add(n, 1);
}

static __u64 ctx_reg(void *ctx, int offset) {
    return *(__u64 *)((char *)ctx + offset);
}

// The return address at the top of the user stack, on entry to a function.
static __u64 caller_of(void *ctx) {
    __u64 ret = 0;
    bpf_probe_read_user(&ret, sizeof(ret), (void *)ctx_reg(ctx, REGS_SP));
    return ret;
}

// A hold of `mutex` by `tid` ends now: added to its line's figures.
static __u64 end_hold(__u64 mutex, __u32 tid, __u64 now) {
    struct held_key hk = {.mutex = mutex, .tid = tid, .pad = 0};
    struct held_since *h = bpf_map_lookup_elem(&held, &hk);
    if (!h)
        return 0;
    __u64 ret = h->ret;
    __u64 hold = now - h->since;
    struct lock_key key = {.mutex = mutex, .ret = ret, .tid = tid, .pad = 0};
    struct lock_stats *st = bpf_map_lookup_elem(&lock_stats, &key);
    if (st) {
        __sync_fetch_and_add(&st->hold_ns, hold);
        __sync_fetch_and_add(&st->holds, 1);
        if (hold > st->max_hold_ns)
            st->max_hold_ns = hold;
    }
    bpf_map_delete_elem(&held, &hk);
    return ret;
}

static void begin_hold(__u64 mutex, __u32 tid, __u64 ret, __u64 now) {
    struct held_key hk = {.mutex = mutex, .tid = tid, .pad = 0};
    struct held_since h = {.since = now, .ret = ret};
    if (bpf_map_update_elem(&held, &hk, &h, BPF_ANY) != 0)
        lost();
}

// A mutex call of thread `tid` begins: kept in `lock_calls` until it returns.
static void put_call(__u32 tid, struct lock_call *c) {
    if (bpf_map_update_elem(&lock_calls, &tid, c, BPF_ANY) != 0)
        lost();
}

// The mutex call in flight in thread `tid`, taken out of `lock_calls`
// into `out`; 0 if there is none.
static int take_call(__u32 tid, struct lock_call *out) {
    struct lock_call *c = bpf_map_lookup_elem(&lock_calls, &tid);
    if (!c)
        return 0;
    *out = *c;
    bpf_map_delete_elem(&lock_calls, &tid);
    return 1;
}

// The figures of `key`, made empty if it has none yet; null if the map is
// full.
static void *stats_of(void *map, const void *key, const void *empty) {
    void *st = bpf_map_lookup_elem(map, key);
    if (!st) {
        bpf_map_update_elem(map, key, empty, 1 /* BPF_NOEXIST */);
        st = bpf_map_lookup_elem(map, key);
    }
    return st;
}

SEC("uprobe")
int lock_enter(void *ctx) {
    __u64 pid_tgid = bpf_get_current_pid_tgid();
    if (!is_target(pid_tgid))
        return 0;
    __u32 tid = (__u32)pid_tgid;
    struct lock_call c = {.mutex = ctx_reg(ctx, REGS_DI), .ret = caller_of(ctx), .held_ret = 0};
    put_call(tid, &c);
    return 0;
}

SEC("uretprobe")
int lock_exit(void *ctx) {
    __u64 now = bpf_ktime_get_ns();
    __u64 pid_tgid = bpf_get_current_pid_tgid();
    if (!is_target(pid_tgid))
        return 0;
    __u32 tid = (__u32)pid_tgid;
    struct lock_call c;
    if (!take_call(tid, &c))
        return 0;
    if ((int)ctx_reg(ctx, REGS_AX) != 0)
        return 0;  // not taken (EBUSY from a trylock, an error)
    struct lock_key key = {.mutex = c.mutex, .ret = c.ret, .tid = tid, .pad = 0};
    struct lock_stats empty = {.acquisitions = 0, .hold_ns = 0, .holds = 0, .max_hold_ns = 0};
    struct lock_stats *st = stats_of(&lock_stats, &key, &empty);
    if (!st) {
        lost();
        return 0;
    }
    __sync_fetch_and_add(&st->acquisitions, 1);
    begin_hold(key.mutex, tid, key.ret, now);
    return 0;
}

SEC("uprobe")
int unlock_enter(void *ctx) {
    __u64 now = bpf_ktime_get_ns();
    __u64 pid_tgid = bpf_get_current_pid_tgid();
    if (!is_target(pid_tgid))
        return 0;
    end_hold(ctx_reg(ctx, REGS_DI), (__u32)pid_tgid, now);
    return 0;
}

// pthread_cond_wait(cond, mutex) and _timedwait: the mutex is released
// inside, and taken again before the call returns.
SEC("uprobe")
int cond_wait_enter(void *ctx) {
    __u64 now = bpf_ktime_get_ns();
    __u64 pid_tgid = bpf_get_current_pid_tgid();
    if (!is_target(pid_tgid))
        return 0;
    __u32 tid = (__u32)pid_tgid;
    __u64 mutex = ctx_reg(ctx, REGS_SI);
    struct lock_call c = {.mutex = mutex, .ret = caller_of(ctx), .held_ret = 0};
    c.held_ret = end_hold(mutex, tid, now);
    put_call(tid, &c);
    return 0;
}

SEC("uretprobe")
int cond_wait_exit(void *ctx) {
    __u64 now = bpf_ktime_get_ns();
    __u64 pid_tgid = bpf_get_current_pid_tgid();
    if (!is_target(pid_tgid))
        return 0;
    __u32 tid = (__u32)pid_tgid;
    struct lock_call c;
    if (!take_call(tid, &c))
        return 0;
    // Held again (also after a timeout): the hold goes on at its line.
    if (c.held_ret != 0)
        begin_hold(c.mutex, tid, c.held_ret, now);
    return 0;
}

// Why a thread left its CPU. Keep in step with attach/bpf.rs (`OffCpu`).
#define OFF_PREEMPTED 0
#define OFF_FUTEX 1
#define OFF_SLEEP 2
#define OFF_DISK 3
#define OFF_REASONS 4
// Not a reason: a thread's time on its CPU, kept beside them.
#define ON_CPU 4
#define PERIOD_KINDS 5

// The state a task leaves its CPU in (`prev_state`, Linux 5.18 and later).
#define TASK_INTERRUPTIBLE 0x1
#define TASK_UNINTERRUPTIBLE 0x2
#define TASK_DEAD 0x80

struct off_stats {
    __u64 count;
    __u64 total_ns;
    __u64 max_ns;
};

// A target task: the period it is in, and its figures so far. Only the
// task's own switches write it, and those follow one another, so its
// figures are added to in place.
struct off_since {
    __u64 since;     // off its CPU since (0: on it)
    __u64 on_since;  // on its CPU since (0: not seen switched in)
    __u32 tid;
    __u32 reason;
    struct off_stats periods[PERIOD_KINDS];
};

struct off_key {
    __u32 tid;
    __u32 reason;
};

// Task pointer -> the target task's entry, for the task's life.
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 32768);
    __type(key, __u64);
    __type(value, struct off_since);
} off_tasks SEC(".maps");

// The figures of target tasks that ended, per thread and reason.
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 65536);
    __type(key, struct off_key);
    __type(value, struct off_stats);
} off_cpu SEC(".maps");

// The kernel's task, as far as it is read here: the offset of `tgid` is
// the running kernel's, relocated at load from its BTF (CO-RE).
struct task_struct {
    int pid;
    int tgid;
} __attribute__((preserve_access_index));

static __u32 tgid_of(__u64 task) {
    struct task_struct *t = (struct task_struct *)task;
    int tgid = 0;
    bpf_probe_read_kernel(&tgid, sizeof(tgid), &t->tgid);
    return (__u32)tgid;
}

// Adds a period of `ns` for `kind` to a task's figures.
static void add_period(struct off_since *task, __u32 kind, __u64 ns) {
    if (kind >= PERIOD_KINDS)
        return;
    struct off_stats *st = &task->periods[kind];
    st->count += 1;
    st->total_ns += ns;
    if (ns > st->max_ns)
        st->max_ns = ns;
}

// Moves an ending task's figures to `off_cpu`, by thread.
static void keep_figures(struct off_since *task) {
    for (__u32 kind = 0; kind < PERIOD_KINDS; kind++) {
        struct off_stats *st = &task->periods[kind];
        if (st->count == 0)
            continue;
        struct off_key key = {.tid = task->tid, .reason = kind};
        struct off_stats empty = {.count = 0, .total_ns = 0, .max_ns = 0};
        struct off_stats *kept = stats_of(&off_cpu, &key, &empty);
        if (kept) {
            __sync_fetch_and_add(&kept->count, st->count);
            __sync_fetch_and_add(&kept->total_ns, st->total_ns);
            if (st->max_ns > kept->max_ns)
                kept->max_ns = st->max_ns;
        }
    }
}

SEC("raw_tracepoint/sched_switch")
int on_switch(__u64 *ctx) {
    // Every context switch of the machine comes here, so the common case,
    // neither task the target's, is made of the cheapest tests: the
    // switched-in task's process read from its task (`config[TGID_CHECK]`
    // says that read was seen right), the switched-out one's from the
    // helper. A target task's entry stays in `off_tasks` for its life and
    // is written in place. A task's first time on a CPU after attach (or
    // after it was made) is not seen: it has no entry until it first leaves.
    __u32 key = CONFIG_TARGET;
    __u32 *target = bpf_map_lookup_elem(&config, &key);
    if (!target || *target == 0)
        return 0;
    key = CONFIG_TGID_CHECK;
    __u32 *check = bpf_map_lookup_elem(&config, &key);
    if (!check)
        return 0;
    __u64 now = 0;
    __u64 next = ctx[2];
    if (*check != TGID_READ_RIGHT || tgid_of(next) == *target) {
        struct off_since *back = bpf_map_lookup_elem(&off_tasks, &next);
        if (back) {
            now = bpf_ktime_get_ns();
            if (back->since != 0) {
                add_period(back, back->reason, now - back->since);
                back->since = 0;
            }
            back->on_since = now;
        }
    }
    __u64 pid_tgid = bpf_get_current_pid_tgid();
    if ((pid_tgid >> 32) != *target)
        return 0;
    if (now == 0)
        now = bpf_ktime_get_ns();
    __u64 state = ctx[3];
    __u64 prev = ctx[1];
    __u32 tid = (__u32)pid_tgid;
    if (*check == TGID_UNCHECKED)
        *check = tgid_of(prev) == *target ? TGID_READ_RIGHT : TGID_READ_WRONG;
    struct off_since *own = bpf_map_lookup_elem(&off_tasks, &prev);
    if (own && own->on_since != 0) {
        add_period(own, ON_CPU, now - own->on_since);
        own->on_since = 0;
    }
    if (state & TASK_DEAD) {
        // It ends: never switched in again (its task may be reused).
        if (own) {
            keep_figures(own);
            bpf_map_delete_elem(&off_tasks, &prev);
        }
        return 0;
    }
    __u32 reason;
    if (ctx[0] || state == 0)
        reason = OFF_PREEMPTED;
    else if (bpf_map_lookup_elem(&inflight, &tid))
        reason = OFF_FUTEX;
    else if (state & TASK_UNINTERRUPTIBLE)
        reason = OFF_DISK;
    else
        reason = OFF_SLEEP;
    if (own) {
        own->tid = tid;
        own->reason = reason;
        own->since = now;
        return 0;
    }
    struct off_since fresh = {.since = now, .on_since = 0, .tid = tid, .reason = reason};
    bpf_map_update_elem(&off_tasks, &prev, &fresh, BPF_ANY);
    return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
