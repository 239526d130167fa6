// SPDX-License-Identifier: MIT OR Apache-2.0
// `locksuit attach`: every futex call of one process, seen from the kernel.
//
// raw_syscalls' sys_enter/sys_exit raw tracepoints (no tracefs needed) keep,
// per thread of the target process, what a futex call was made with (time,
// word, operation, the user registers and a copy of the top of the user
// stack); its exit sends that with the exit time and return value to user
// space through a ring buffer. The analyzer unwinds the stack copy with the
// modules' call frame information, as it does the shim's snapshots.
//
// Built by analyzer/build.rs with clang -target bpf; no libbpf headers are
// needed: the few helpers, constants and map macros are declared here.

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

// x86_64 only: the futex system call's number and struct pt_regs offsets.
#define NR_FUTEX 202
#define REGS_BP 32
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
    __u8 stack[STACK_BYTES];
};

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
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

SEC("raw_tracepoint/sys_enter")
int futex_enter(__u64 *ctx) {
    if (ctx[1] != NR_FUTEX)
        return 0;
    __u64 pid_tgid = bpf_get_current_pid_tgid();
    if (!is_target(pid_tgid))
        return 0;
    __u32 zero = 0;
    struct event *e = bpf_map_lookup_elem(&scratch, &zero);
    if (!e)
        return 0;
    void *regs = (void *)ctx[0];
    e->tid = (__u32)pid_tgid;
    e->uaddr = reg(regs, REGS_DI);
    e->op = (__u32)reg(regs, REGS_SI);
    e->ip = reg(regs, REGS_IP);
    e->sp = reg(regs, REGS_SP);
    e->bp = reg(regs, REGS_BP);
    e->exit_ns = 0;
    e->ret = 0;
    e->pad = 0;
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

SEC("raw_tracepoint/sys_exit")
int futex_exit(__u64 *ctx) {
    __u64 now = bpf_ktime_get_ns();
    __u64 pid_tgid = bpf_get_current_pid_tgid();
    if (!is_target(pid_tgid))
        return 0;
    void *regs = (void *)ctx[0];
    if (reg(regs, REGS_ORIG_AX) != NR_FUTEX)
        return 0;
    __u32 tid = (__u32)pid_tgid;
    struct event *e = bpf_map_lookup_elem(&inflight, &tid);
    if (!e)
        return 0;
    e->exit_ns = now;
    e->ret = (__s64)ctx[1];
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

char LICENSE[] SEC("license") = "Dual MIT/GPL";
