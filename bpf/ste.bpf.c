// SPDX-License-Identifier: (MIT OR GPL-2.0)
//
// ste's BPF programs: the process tree of one command, followed in the kernel, and the system
// calls of that tree counted in the kernel.
//
// Tree: every task of the tree carries task-local storage (`tasks`). The root gets it from user
// space (through a pidfd) before it is released; a task created by a task that has it gets it at
// sched_process_fork. So the filter costs one task-storage lookup, a pointer test for every
// other task on the machine. Tracing programs have task storage from Linux 5.12 only (and
// bpf_get_current_task_btf from 5.11): before, the `_h` variants of the programs keep the tree
// in a hash keyed by the address of each task's task_struct (`tasks_h`), which stays the task's
// across an exec that changes its pid and is not reused until the task is freed after its last
// switch; the root, whose address user space cannot know, is named by its pid (`root_h`) and
// adopted by the first program that runs in it (its exec, or its exit when the exec failed). Fork, exec (with argv read from the new image's argument area)
// and exit records go to the ring buffer `events`, and, when the per-process ledger is kept,
// each task's CPU (and, with cfg_figures, the rest of what taskstats's exit record carries) as
// it leaves a CPU for the last time; a record that does not fit is counted
// in `counters[CNT_DROPPED]`, never silently lost.
//
// System calls (attached only for --syscalls): counted at raw_syscalls:sys_exit, where the
// number, the result and (with timing) the time since sys_enter are all known. Like strace,
// a call is counted when it returns: exit and exit_group never do. Tree totals go to a per-CPU
// array indexed by syscall number (compat i386 numbers at 512 + nr); failures by errno to a
// hash; per thread (per-process mode) to a second task storage, written as a record when the
// thread exits or execs.
//
// malloc's SDT probes (attached only for --malloc, when the libc or the command's program has
// glibc's `memory_*` probes): one uprobe program for every probe site, told by its attach cookie
// which site it is (`sdt_sites`: the probe's kind and how to read its size argument, decoded
// from the note's argument spec in user space). Hits of the tree's tasks are counted per kind
// in a per-CPU array, sizes in a hash (a size that does not fit is counted, not lost).
//
// Kernel structures are read at offsets the loader takes from the running kernel's BTF (see
// "Kernel structures" below). Built by bpf/build.sh; the object is committed next to this file.

#include <linux/bpf.h>

typedef __u8 u8;
typedef __u32 u32;
typedef __s32 s32;
typedef __u64 u64;
typedef __s64 s64;
typedef _Bool bool;
#define true 1
#define false 0

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

// ---- Kernel structures -------------------------------------------------------------------------
//
// No CO-RE: the loader (src/kernel/bpf) reads a dozen offsets from the kernel's BTF and sets
// them below as `const volatile` values, and the per-process programs (fork, exec, exit) read
// the fields they name with bpf_probe_read_kernel. That costs a helper call per field, once per
// process event, and spares the verifier walking the kernel's types for every dereference.
//
// The system-call programs, which run on every call, read only what has a fixed layout:
// x86-64's `struct pt_regs` (the user-register frame, arch/x86/include/asm/ptrace.h), and
// `thread_info.status`, task_struct's first member with CONFIG_THREAD_INFO_IN_TASK, at byte 16
// from Linux 5.11 (`syscall_work` came before it); the loader checks both offsets against the
// kernel's BTF and loads the `_h` variants, which read the status at its offset there, when
// they differ.

struct pt_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	unsigned long ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
};

struct thread_info {
	unsigned long flags;
	unsigned long syscall_work;
	u32 status;
	u32 cpu;
};

struct task_struct {
	struct thread_info thread_info;
};

// Byte offsets in the running kernel's structures (set by the loader from its BTF).
const volatile u32 off_task_pid = 0;
const volatile u32 off_task_tgid = 0;
const volatile u32 off_task_exit_code = 0;
const volatile u32 off_task_mm = 0;
const volatile u32 off_task_signal = 0;
const volatile u32 off_task_group_leader = 0;
// task_struct.se.sum_exec_runtime, .utime, .stime
const volatile u32 off_task_runtime = 0;
const volatile u32 off_task_utime = 0;
const volatile u32 off_task_stime = 0;
// The figures of a task's ledger, read at its last switch when cfg_figures is set (the kernel's
// BTF has them all): task_struct.sched_info.run_delay, .nvcsw, .nivcsw, .min_flt, .maj_flt,
// .ioac.rchar, .ioac.wchar, .ioac.read_bytes, .ioac.write_bytes, .delays (a pointer), and
// task_delay_info.blkio_delay, .swapin_delay, .freepages_delay, .thrashing_delay,
// .compact_delay: what taskstats's exit record carries (kernel/tsacct.c, kernel/delayacct.c).
const volatile u32 cfg_figures = 0;
const volatile u32 off_task_run_delay = 0;
const volatile u32 off_task_nvcsw = 0;
const volatile u32 off_task_nivcsw = 0;
const volatile u32 off_task_min_flt = 0;
const volatile u32 off_task_maj_flt = 0;
const volatile u32 off_task_rchar = 0;
const volatile u32 off_task_wchar = 0;
const volatile u32 off_task_read_bytes = 0;
const volatile u32 off_task_write_bytes = 0;
const volatile u32 off_task_delays = 0;
const volatile u32 off_delays_blkio = 0;
const volatile u32 off_delays_swapin = 0;
const volatile u32 off_delays_freepages = 0;
const volatile u32 off_delays_thrashing = 0;
const volatile u32 off_delays_compact = 0;
// signal_struct.live.counter, .group_exit_code, .flags
const volatile u32 off_signal_live = 0;
const volatile u32 off_signal_group_exit_code = 0;
const volatile u32 off_signal_flags = 0;
// task_struct.__state (.state before Linux 5.14, a long whose low half this reads), for the
// last switch before Linux 5.18, whose sched_switch passes no prev_state; and the offset of
// thread_info.status in task_struct, for the `_h` system-call programs.
const volatile u32 off_task_state = 0;
const volatile u32 off_task_ti_status = 0;
// mm_struct.hiwater_rss, .hiwater_vm, .total_vm, .arg_start, .arg_end, .rss_stat (an array of
// percpu_counter; before Linux 6.2 a struct mm_rss_stat of atomic_long_t counters, which the
// loader describes with the same two numbers)
const volatile u32 off_mm_hiwater_rss = 0;
const volatile u32 off_mm_hiwater_vm = 0;
const volatile u32 off_mm_total_vm = 0;
const volatile u32 off_mm_arg_start = 0;
const volatile u32 off_mm_arg_end = 0;
const volatile u32 off_mm_rss_stat = 0;
// sizeof(struct percpu_counter) and offsetof(struct percpu_counter, count) (of atomic_long_t
// and its counter before Linux 6.2)
const volatile u32 size_percpu_counter = 0;
const volatile u32 off_percpu_counter_count = 0;

static __always_inline u64 kread_u64(const void *base, u32 off)
{
	u64 v = 0;
	bpf_probe_read_kernel(&v, sizeof(v), (const char *)base + off);
	return v;
}

static __always_inline s32 kread_s32(const void *base, u32 off)
{
	s32 v = 0;
	bpf_probe_read_kernel(&v, sizeof(v), (const char *)base + off);
	return v;
}

static __always_inline void *kread_ptr(const void *base, u32 off)
{
	return (void *)kread_u64(base, off);
}

// x86: arch/x86/include/asm/thread_info.h, include/linux/sched/signal.h, include/linux/mm_types_task.h
#define TS_COMPAT 0x0002
#define SIGNAL_GROUP_EXIT 0x00000004
// include/linux/sched.h
#define TASK_DEAD 0x00000080
#define MM_FILEPAGES 0
#define MM_ANONPAGES 1
#define MM_SHMEMPAGES 3

// ---- Records shared with user space (src/track/ebpf.rs mirrors them) ------------------------

#define EV_FORK 1
#define EV_EXEC 2
#define EV_EXIT 3
#define EV_CALLS 4
#define EV_LAST_SWITCH 5

struct ev_fork {
	u32 kind;
	s32 parent_tgid;
	s32 child_tid;
	s32 child_tgid;
	u64 ts;
};

struct ev_exec {
	u32 kind;
	s32 tgid;
	s32 former_tid;
	u32 argv_len;
	u64 ts;
	// arg_end - arg_start: more than argv_len when the argument area did not fit.
	u64 argv_total;
	u8 argv[];
};

#define EXIT_GROUP_DEAD 1
#define EXIT_HAS_MM 2

struct ev_exit {
	u32 kind;
	s32 tid;
	s32 tgid;
	u32 flags;
	u64 ts;
	// The process's wait status (valid with EXIT_GROUP_DEAD).
	s32 status;
	u32 pad;
	// VmHWM in pages (valid with EXIT_GROUP_DEAD | EXIT_HAS_MM).
	u64 hiwater_pages;
	// VmPeak in pages (likewise).
	u64 hiwater_vm_pages;
};

// A task's CPU as it leaves the CPU for the last time, when the scheduler's runtime is final.
struct ev_last_switch {
	u32 kind;
	s32 tid;
	s32 tgid;
	u32 pad;
	u64 ts;
	// se.sum_exec_runtime: the task's whole time on a CPU.
	u64 runtime_ns;
	// utime and stime: tick samples, the proportion in which getrusage() splits the runtime.
	u64 utime_ns;
	u64 stime_ns;
	// With cfg_figures, the rest of the task's ledger (else zero): sched_info.run_delay, the
	// context switches (this last one counted), the page faults, the I/O counters (rchar,
	// wchar, read_bytes, write_bytes, to the byte), and the delay accounting's block-I/O wait
	// and its swap-in, free-pages, thrashing and compaction waits summed.
	u64 run_delay_ns;
	u64 nvcsw;
	u64 nivcsw;
	u64 min_flt;
	u64 maj_flt;
	u64 rchar;
	u64 wchar;
	u64 read_bytes;
	u64 write_bytes;
	u64 blkio_delay_ns;
	u64 reclaim_delay_ns;
};

struct call_entry {
	u32 idx;
	u32 pad;
	u64 calls;
	u64 errors;
	u64 ns;
	u64 max_ns;
};

struct ev_calls {
	u32 kind;
	s32 tid;
	s32 tgid;
	u32 n;
	u64 ts;
	struct call_entry e[];
};

// ---- Configuration, set by user space at load time --------------------------------------------

// Measure the time of each call (attach sys_enter too).
const volatile u32 cfg_timed = 0;
// Keep per-thread counts and send them at thread exit and exec.
const volatile u32 cfg_per_thread = 0;
// Whether the last-switch program is attached: the `_h` programs then leave a task in `tasks_h`
// until its last switch, else they take it out at its exit.
const volatile u32 cfg_ledger = 0;
// The number of rt_sigreturn, which erases the call number (orig_ax = -1) as it restores the
// registers: a call that returns with -1 made it, unless a tracer skipped the call.
const volatile u32 cfg_sigreturn_nr = 0xffffffff;

// ---- Maps ---------------------------------------------------------------------------------------

#define NIDX 1024 // syscall numbers: native 0..511, compat 512 + nr
#define ARGV_MAX (1 << 18)

#define TASK_LAUNCHING 1 // the root before its exec: its calls are ste's launch code
#define TASK_FORK_RETURN 2 // a new task: its first sys_exit is its return from fork

struct task_state {
	u64 enter_ns;
	u32 flags;
	// The number of the call in progress (timed mode).
	u32 enter_nr;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_state);
} tasks SEC(".maps");

struct thread_calls {
	u64 calls[NIDX];
	u64 errors[NIDX];
	u64 ns[NIDX];
	u64 max_ns[NIDX];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct thread_calls);
} calls SEC(".maps");

// The `_h` programs' tree and per-thread counts, keyed by task_struct address (before Linux
// 5.12). Entries are made as tasks are forked and taken out as they end: no preallocation.
#define TASKS_H_MAX (1 << 16)

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, TASKS_H_MAX);
	__type(key, u64);
	__type(value, struct task_state);
} tasks_h SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, TASKS_H_MAX);
	__type(key, u64);
	__type(value, struct thread_calls);
} calls_h SEC(".maps");

// Zeroes, never written: what a thread's entry in `calls_h` is made from (a program's stack
// holds 512 bytes).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct thread_calls);
} calls_zero SEC(".maps");

// The root's pid, written by user space before its release, until a program running in the root
// adopts it into `tasks_h` (then 0).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u32);
} root_h SEC(".maps");

struct total {
	u64 calls;
	u64 errors;
	u64 ns;
	u64 max_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NIDX);
	__type(key, u32);
	__type(value, struct total);
} totals SEC(".maps");

struct errno_key {
	u32 idx;
	s32 err;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct errno_key);
	__type(value, u64);
} errnos SEC(".maps");

#define CNT_DROPPED 0 // ring buffer records that did not fit
#define CNT_UNTRACKED 1 // new tasks whose storage could not be created (not followed)
#define CNT_NO_THREAD_CALLS 2 // calls not counted per thread (storage could not be created)
#define CNT_BAD_NR 3 // calls with a number outside 0..511 (x32, or skipped by seccomp/ptrace)
#define CNT_ERRNO_FULL 4 // failures not counted by errno (the errnos map was full)
#define CNT_SDT_SIZES_FULL 5 // SDT probe sizes not kept by value (the sdt_sizes map was full)
// One word the other way, written by the reader: non-zero while it batches (see wake_flags).
#define CTL_READER_BATCHING 6
#define NCOUNTERS 7

// Mapped by the reader, which reads the loss counters at nearly every drain: a load, where a
// lookup would be a system call.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NCOUNTERS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, u32);
	__type(value, u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24);
} events SEC(".maps");

// One buffer per CPU for records larger than the stack (argv, per-thread counts); user space
// sets max_entries to the number of possible CPUs.
struct scratch {
	u8 data[sizeof(struct ev_exec) + ARGV_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct scratch);
} scratch SEC(".maps");

// ---- Helpers ------------------------------------------------------------------------------------

static __always_inline void count(u32 which)
{
	u64 *v = bpf_map_lookup_elem(&counters, &which);
	if (v)
		__sync_fetch_and_add(v, 1);
}

// The notification flags of a record of `size` bytes (0 for one already reserved, which the
// data waiting counts). While the reader batches, it sleeps
// between drains and is woken only by a notification the record forces: one that takes the
// data waiting past a quarter of the ring, so that a burst of long argv is drained long before
// the ring is full (a record that does not fit is lost); the others ask for none. Otherwise the
// kernel's rule holds: a notification when the reader has caught up.
static __always_inline u64 wake_flags(u64 size)
{
	u64 waiting = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
	if (waiting + size > bpf_ringbuf_query(&events, BPF_RB_RING_SIZE) / 4)
		return BPF_RB_FORCE_WAKEUP;
	u32 k = CTL_READER_BATCHING;
	u64 *batching = bpf_map_lookup_elem(&counters, &k);
	return batching && *batching ? BPF_RB_NO_WAKEUP : 0;
}

// Adds one to the count under `key` in a hash of counts; 0 when the hash is full.
static __always_inline int bump(void *map, void *key)
{
	u64 *n = bpf_map_lookup_elem(map, key);
	if (!n) {
		u64 one = 1;
		if (!bpf_map_update_elem(map, key, &one, BPF_NOEXIST))
			return 1;
		// Another CPU added it meanwhile (or the hash is full).
		n = bpf_map_lookup_elem(map, key);
		if (!n)
			return 0;
	}
	__sync_fetch_and_add(n, 1);
	return 1;
}

static __always_inline void *scratch_buf(void)
{
	u32 cpu = bpf_get_smp_processor_id();
	return bpf_map_lookup_elem(&scratch, &cpu);
}

// Sends the thread's per-call counts as one record, then clears them.
static __always_inline void send_calls(struct thread_calls *c, void *task)
{
	struct ev_calls *ev = scratch_buf();
	if (!ev) {
		count(CNT_DROPPED);
		return;
	}
	ev->kind = EV_CALLS;
	ev->tid = kread_s32(task, off_task_pid);
	ev->tgid = kread_s32(task, off_task_tgid);
	ev->ts = bpf_ktime_get_ns();
	ev->n = 0;
	// The entry count goes through memory (volatile), so the verifier sees a bounded unknown
	// rather than 1,024 distinct constants, and the loop is verified once per iteration.
#pragma clang loop unroll(disable)
	for (u32 i = 0; i < NIDX; i++) {
		u64 n_calls = c->calls[i];
		if (!n_calls)
			continue;
		u32 n = *(volatile u32 *)&ev->n;
		if (n >= NIDX)
			break;
		struct call_entry *e = &ev->e[n & (NIDX - 1)];
		e->idx = i;
		e->pad = 0;
		e->calls = n_calls;
		e->errors = c->errors[i];
		e->ns = c->ns[i];
		e->max_ns = c->max_ns[i];
		c->calls[i] = 0;
		c->errors[i] = 0;
		c->ns[i] = 0;
		c->max_ns[i] = 0;
		*(volatile u32 *)&ev->n = n + 1;
	}
	u32 n = *(volatile u32 *)&ev->n;
	if (n == 0)
		return;
	u64 size = sizeof(struct ev_calls) + (u64)(n & (NIDX * 2 - 1)) * sizeof(struct call_entry);
	if (size > sizeof(struct scratch))
		return;
	if (bpf_ringbuf_output(&events, ev, size, wake_flags(size)))
		count(CNT_DROPPED);
}

static __always_inline void flush_calls(struct task_struct *task)
{
	if (!cfg_per_thread)
		return;
	struct thread_calls *c = bpf_task_storage_get(&calls, task, 0, 0);
	if (!c)
		return;
	send_calls(c, task);
}

// ---- The tree kept in a hash (the `_h` programs, before Linux 5.12) ----------------------------

// The entry of the task at `task` in the tree; with `adopt`, the root's, made when `task` is the
// root that user space named and no program has adopted yet.
static __always_inline struct task_state *tracked_h(u64 task, const bool adopt)
{
	struct task_state *st = bpf_map_lookup_elem(&tasks_h, &task);
	if (st || !adopt)
		return st;
	u32 k = 0;
	u32 *root = bpf_map_lookup_elem(&root_h, &k);
	if (!root || *root == 0 || *root != (u32)bpf_get_current_pid_tgid())
		return 0;
	struct task_state init = { .enter_ns = 0, .flags = TASK_LAUNCHING, .enter_nr = 0 };
	if (bpf_map_update_elem(&tasks_h, &task, &init, BPF_NOEXIST)) {
		count(CNT_UNTRACKED);
		return 0;
	}
	*root = 0;
	return bpf_map_lookup_elem(&tasks_h, &task);
}

// Sends the counts of the thread at `task`, and with `end` takes its entry out (it is exiting).
static __always_inline void flush_calls_h(u64 task, const bool end)
{
	if (!cfg_per_thread)
		return;
	struct thread_calls *c = bpf_map_lookup_elem(&calls_h, &task);
	if (!c)
		return;
	send_calls(c, (void *)task);
	if (end)
		bpf_map_delete_elem(&calls_h, &task);
}

// The per-thread counts of the thread at `task`, made (zero) at its first call.
static __always_inline struct thread_calls *calls_of_h(u64 task)
{
	struct thread_calls *c = bpf_map_lookup_elem(&calls_h, &task);
	if (c)
		return c;
	u32 k = 0;
	struct thread_calls *zero = bpf_map_lookup_elem(&calls_zero, &k);
	if (!zero)
		return 0;
	bpf_map_update_elem(&calls_h, &task, zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&calls_h, &task);
}

// ---- Tree ---------------------------------------------------------------------------------------

static __always_inline void send_fork(void *parent, void *child)
{
	struct ev_fork *ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	if (!ev) {
		count(CNT_DROPPED);
		return;
	}
	ev->kind = EV_FORK;
	ev->parent_tgid = kread_s32(parent, off_task_tgid);
	ev->child_tid = kread_s32(child, off_task_pid);
	ev->child_tgid = kread_s32(child, off_task_tgid);
	ev->ts = bpf_ktime_get_ns();
	bpf_ringbuf_submit(ev, wake_flags(0));
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(handle_fork, struct task_struct *parent, struct task_struct *child)
{
	if (!bpf_task_storage_get(&tasks, parent, 0, 0))
		return 0;
	struct task_state *st =
		bpf_task_storage_get(&tasks, child, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!st) {
		count(CNT_UNTRACKED);
		return 0;
	}
	st->flags = TASK_FORK_RETURN;
	send_fork(parent, child);
	return 0;
}

// A raw tracepoint: its arguments (parent, child) are plain addresses, the hash's keys.
SEC("raw_tp/sched_process_fork")
int handle_fork_h(u64 *ctx)
{
	u64 parent = ctx[0], child = ctx[1];
	if (!tracked_h(parent, false))
		return 0;
	struct task_state st = { .enter_ns = 0, .flags = TASK_FORK_RETURN, .enter_nr = 0 };
	if (bpf_map_update_elem(&tasks_h, &child, &st, BPF_ANY)) {
		count(CNT_UNTRACKED);
		return 0;
	}
	send_fork((void *)parent, (void *)child);
	return 0;
}

// The exec record of the task at `task`, which replaced `old_pid` (a thread that exec'd).
static __always_inline int send_exec(void *task, int old_pid)
{
	struct ev_exec *ev = scratch_buf();
	if (!ev) {
		count(CNT_DROPPED);
		return 0;
	}
	ev->kind = EV_EXEC;
	ev->tgid = kread_s32(task, off_task_tgid);
	ev->former_tid = old_pid;
	ev->ts = bpf_ktime_get_ns();
	void *mm = kread_ptr(task, off_task_mm);
	u64 start = kread_u64(mm, off_mm_arg_start), end = kread_u64(mm, off_mm_arg_end);
	u64 total = end > start ? end - start : 0;
	u64 len = total > ARGV_MAX ? ARGV_MAX : total;
	ev->argv_total = total;
	// Keep the compiler from testing one register and passing another to the helper.
	barrier_var(len);
	if (len > ARGV_MAX)
		return 0;
	// The kernel has just copied the arguments to the new stack: the pages are present.
	if (bpf_probe_read_user(ev->argv, len, (void *)start))
		len = 0;
	ev->argv_len = len;
	barrier_var(len);
	if (len > ARGV_MAX)
		return 0;
	u64 size = sizeof(*ev) + len;
	if (size > sizeof(struct scratch))
		return 0;
	if (bpf_ringbuf_output(&events, ev, size, wake_flags(size)))
		count(CNT_DROPPED);
	return 0;
}

// Exec and exit run in the task they trace, so they are raw tracepoints on the current task:
// the kernel loads a raw tracepoint without searching its BTF for the tracepoint's function, as
// it does for every tp_btf program (a cost in ste's start-up: bench/README.md). Fork stays
// tp_btf: it marks the child, for which only tp_btf gives the typed pointer that the task
// storage needs.
SEC("raw_tp/sched_process_exec")
int handle_exec(u64 *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	int old_pid = (int)ctx[1]; // (task, old_pid, bprm)
	struct task_state *st = bpf_task_storage_get(&tasks, task, 0, 0);
	if (!st)
		return 0;
	// The counts so far belong to the image being replaced.
	flush_calls(task);
	st->flags &= ~TASK_LAUNCHING;
	return send_exec(task, old_pid);
}

SEC("raw_tp/sched_process_exec")
int handle_exec_h(u64 *ctx)
{
	u64 task = bpf_get_current_task();
	struct task_state *st = tracked_h(task, true);
	if (!st)
		return 0;
	flush_calls_h(task, false);
	st->flags &= ~TASK_LAUNCHING;
	return send_exec((void *)task, (int)ctx[1]);
}

// The exit record of the task at `task`.
static __always_inline void send_exit(void *task)
{
	struct ev_exit *ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	if (!ev) {
		count(CNT_DROPPED);
		return;
	}
	ev->kind = EV_EXIT;
	ev->tid = kread_s32(task, off_task_pid);
	ev->tgid = kread_s32(task, off_task_tgid);
	ev->ts = bpf_ktime_get_ns();
	ev->flags = 0;
	ev->status = 0;
	ev->pad = 0;
	ev->hiwater_pages = 0;
	ev->hiwater_vm_pages = 0;
	// do_exit() decrements signal->live before this tracepoint: 0 means this is the last
	// thread of the process.
	void *sig = kread_ptr(task, off_task_signal);
	if (kread_s32(sig, off_signal_live) == 0) {
		ev->flags |= EXIT_GROUP_DEAD;
		// As wait_task_zombie() computes the status the parent will see.
		u32 sig_flags = kread_s32(sig, off_signal_flags);
		if (sig_flags & SIGNAL_GROUP_EXIT)
			ev->status = kread_s32(sig, off_signal_group_exit_code);
		else
			ev->status = kread_s32(kread_ptr(task, off_task_group_leader),
					       off_task_exit_code);
		// Since Linux 6.16 the tracepoint runs before exit_mm(): the memory is still
		// attached, and VmHWM is computed as /proc/PID/status does.
		void *mm = kread_ptr(task, off_task_mm);
		if (mm) {
			u32 stat = off_mm_rss_stat + off_percpu_counter_count;
			s64 rss = kread_u64(mm, stat + MM_FILEPAGES * size_percpu_counter) +
				  kread_u64(mm, stat + MM_ANONPAGES * size_percpu_counter) +
				  kread_u64(mm, stat + MM_SHMEMPAGES * size_percpu_counter);
			u64 hw = kread_u64(mm, off_mm_hiwater_rss);
			if (rss > 0 && (u64)rss > hw)
				hw = rss;
			ev->hiwater_pages = hw;
			// As get_mm_hiwater_vm() computes VmPeak.
			u64 vm = kread_u64(mm, off_mm_total_vm);
			u64 hvm = kread_u64(mm, off_mm_hiwater_vm);
			ev->hiwater_vm_pages = hvm > vm ? hvm : vm;
			ev->flags |= EXIT_HAS_MM;
		}
	}
	bpf_ringbuf_submit(ev, wake_flags(0));
}

SEC("raw_tp/sched_process_exit")
int handle_exit(u64 *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	if (!bpf_task_storage_get(&tasks, task, 0, 0))
		return 0;
	flush_calls(task);
	send_exit(task);
	return 0;
}

SEC("raw_tp/sched_process_exit")
int handle_exit_h(u64 *ctx)
{
	u64 task = bpf_get_current_task();
	if (!tracked_h(task, true))
		return 0;
	flush_calls_h(task, true);
	send_exit((void *)task);
	// No system call after this; its last switch takes it out when that program is attached.
	if (!cfg_ledger)
		bpf_map_delete_elem(&tasks_h, &task);
	return 0;
}

// The last-switch record of the task at `task`.
static __always_inline void send_last_switch(void *task)
{
	struct ev_last_switch *ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	if (!ev) {
		count(CNT_DROPPED);
		return;
	}
	ev->kind = EV_LAST_SWITCH;
	ev->tid = kread_s32(task, off_task_pid);
	ev->tgid = kread_s32(task, off_task_tgid);
	ev->pad = 0;
	ev->ts = bpf_ktime_get_ns();
	ev->runtime_ns = kread_u64(task, off_task_runtime);
	ev->utime_ns = kread_u64(task, off_task_utime);
	ev->stime_ns = kread_u64(task, off_task_stime);
	ev->run_delay_ns = 0;
	ev->nvcsw = 0;
	ev->nivcsw = 0;
	ev->min_flt = 0;
	ev->maj_flt = 0;
	ev->rchar = 0;
	ev->wchar = 0;
	ev->read_bytes = 0;
	ev->write_bytes = 0;
	ev->blkio_delay_ns = 0;
	ev->reclaim_delay_ns = 0;
	if (cfg_figures) {
		ev->run_delay_ns = kread_u64(task, off_task_run_delay);
		ev->nvcsw = kread_u64(task, off_task_nvcsw);
		ev->nivcsw = kread_u64(task, off_task_nivcsw);
		ev->min_flt = kread_u64(task, off_task_min_flt);
		ev->maj_flt = kread_u64(task, off_task_maj_flt);
		ev->rchar = kread_u64(task, off_task_rchar);
		ev->wchar = kread_u64(task, off_task_wchar);
		ev->read_bytes = kread_u64(task, off_task_read_bytes);
		ev->write_bytes = kread_u64(task, off_task_write_bytes);
		// NULL when the kernel could not allocate it: the reads then fail and give 0.
		void *d = kread_ptr(task, off_task_delays);
		if (d) {
			ev->blkio_delay_ns = kread_u64(d, off_delays_blkio);
			ev->reclaim_delay_ns = kread_u64(d, off_delays_swapin) +
					       kread_u64(d, off_delays_freepages) +
					       kread_u64(d, off_delays_thrashing) +
					       kread_u64(d, off_delays_compact);
		}
	}
	bpf_ringbuf_submit(ev, wake_flags(0));
}

// The task's last switch (attached only when the per-process ledger is kept). The exit record
// and taskstats's are written in do_exit(), before the task's last switch: the scheduler has not
// yet added the runtime since its last tick or switch (up to a tick; all of it for a process
// shorter than one). Here, at the switch away from a dead task, it has (the task was dequeued
// just before). Its other counters are final there too (faults, I/O, waits), so with cfg_figures
// the record carries them and ste needs no taskstats listener, whose records it would have to
// match to the tree in user space. Every context switch of the machine runs this program: the
// state test comes first, and a switch away from a live task costs no more than it.
SEC("raw_tp/sched_switch")
int handle_last_switch(u64 *ctx)
{
	// (preempt, prev, next, prev_state); prev is still the current task.
	if ((u32)ctx[3] != TASK_DEAD)
		return 0;
	struct task_struct *task = bpf_get_current_task_btf();
	if (!bpf_task_storage_get(&tasks, task, 0, 0))
		return 0;
	send_last_switch(task);
	return 0;
}

// Before Linux 5.18 sched_switch passes no prev_state (preempt, prev, next): the state is read
// from the task, as the tracepoint itself read it then.
SEC("raw_tp/sched_switch")
int handle_last_switch_s(u64 *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	if ((u32)kread_s32(task, off_task_state) != TASK_DEAD)
		return 0;
	if (!bpf_task_storage_get(&tasks, task, 0, 0))
		return 0;
	send_last_switch(task);
	return 0;
}

SEC("raw_tp/sched_switch")
int handle_last_switch_h(u64 *ctx)
{
	u64 task = bpf_get_current_task();
	if ((u32)kread_s32((void *)task, off_task_state) != TASK_DEAD)
		return 0;
	if (!tracked_h(task, true))
		return 0;
	send_last_switch((void *)task);
	bpf_map_delete_elem(&tasks_h, &task);
	return 0;
}

// ---- System calls ---------------------------------------------------------------------------

SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long id)
{
	struct task_state *st = bpf_task_storage_get(&tasks, bpf_get_current_task_btf(), 0, 0);
	if (st) {
		st->enter_ns = bpf_ktime_get_ns();
		st->enter_nr = id;
	}
	return 0;
}

SEC("raw_tp/sys_enter")
int sys_enter_h(u64 *ctx)
{
	struct task_state *st = tracked_h(bpf_get_current_task(), false);
	if (st) {
		st->enter_ns = bpf_ktime_get_ns();
		st->enter_nr = ctx[1]; // (regs, id)
	}
	return 0;
}

// Counts a call of the task at `task` that returned `ret`: its number `nr` (-1 when a
// sigreturn erased it), its ABI from thread_info.status (read directly, or at its offset by
// the `_h` programs), its time since sys_enter.
static __always_inline int count_call(struct task_state *st, void *task, u64 nr, long ret,
				      const bool h)
{
#define STATUS (h ? (u32)kread_s32(task, off_task_ti_status) \
		  : ((struct task_struct *)task)->thread_info.status)
	u64 dt = 0;
	if (cfg_timed) {
		u64 t0 = st->enter_ns;
		st->enter_ns = 0;
		if (t0) {
			dt = bpf_ktime_get_ns() - t0;
			if (nr == (u64)-1)
				nr = st->enter_nr;
		}
	} else if (nr == (u64)-1 && !(STATUS & TS_COMPAT)) {
		nr = cfg_sigreturn_nr;
	}
	if (nr >= NIDX / 2) {
		count(CNT_BAD_NR);
		return 0;
	}
	u32 idx = nr;
	if (STATUS & TS_COMPAT)
		idx += NIDX / 2;
#undef STATUS
	bool failed = ret < 0 && ret >= -4095;
	struct total *t = bpf_map_lookup_elem(&totals, &idx);
	if (t) {
		t->calls++;
		if (failed)
			t->errors++;
		t->ns += dt;
		if (dt > t->max_ns)
			t->max_ns = dt;
	}
	if (failed) {
		struct errno_key k = { .idx = idx, .err = -ret };
		if (!bump(&errnos, &k))
			count(CNT_ERRNO_FULL);
	}
	if (cfg_per_thread) {
		struct thread_calls *c =
			h ? calls_of_h((u64)task)
			  : bpf_task_storage_get(&calls, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!c) {
			count(CNT_NO_THREAD_CALLS);
			return 0;
		}
		u32 i = idx & (NIDX - 1);
		c->calls[i]++;
		if (failed)
			c->errors[i]++;
		c->ns[i] += dt;
		if (dt > c->max_ns[i])
			c->max_ns[i] = dt;
	}
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct task_state *st = bpf_task_storage_get(&tasks, task, 0, 0);
	if (!st)
		return 0;
	if (st->flags) {
		// A new task returning from fork (its parent counts that call), or the root
		// before its exec.
		st->flags &= ~TASK_FORK_RETURN;
		return 0;
	}
	return count_call(st, task, regs->orig_ax, ret, false);
}

// A raw tracepoint (regs, ret): pt_regs.orig_ax read from the frame's address.
SEC("raw_tp/sys_exit")
int sys_exit_h(u64 *ctx)
{
	u64 task = bpf_get_current_task();
	struct task_state *st = tracked_h(task, false);
	if (!st)
		return 0;
	if (st->flags) {
		st->flags &= ~TASK_FORK_RETURN;
		return 0;
	}
	u64 nr = kread_u64((void *)ctx[0], __builtin_offsetof(struct pt_regs, orig_ax));
	return count_call(st, (void *)task, nr, (long)ctx[1], true);
}

// ---- malloc's SDT probes ----------------------------------------------------------------------

#define SDT_SITES 256 // probe sites (cookies 0..255)
#define SDT_KINDS 64 // distinct probe names

#define ARG_NONE 0 // no size argument, or one whose form is not decoded
#define ARG_REG 1 // N@%reg: the register's value
#define ARG_MEM 2 // N@disp(%reg): N bytes at reg + disp in the process's memory
#define ARG_CONST 3 // N@$value

// x86-64 `struct pt_regs` (the user registers at the probe) as 21 words: r15 r14 r13 r12 bp bx
// r11 r10 r9 r8 ax cx dx si di orig_ax ip cs flags sp ss; `reg` indexes it.
#define NREGS 21

struct sdt_arg {
	u32 form;
	u32 reg;
	// Bytes, negative when signed (the note's `-4@`).
	s32 size;
	u32 pad;
	// ARG_MEM: the displacement; ARG_CONST: the value.
	s64 disp;
};

struct sdt_site {
	u32 kind;
	u32 pad;
	struct sdt_arg size;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SDT_SITES);
	__type(key, u32);
	__type(value, struct sdt_site);
} sdt_sites SEC(".maps");

struct sdt_total {
	u64 hits;
	// Hits whose size argument was read, and the sum of those sizes.
	u64 sized;
	u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SDT_KINDS);
	__type(key, u32);
	__type(value, struct sdt_total);
} sdt_totals SEC(".maps");

struct sdt_size_key {
	u32 kind;
	u32 pad;
	u64 size;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct sdt_size_key);
	__type(value, u64);
} sdt_sizes SEC(".maps");

// The value of an argument, truncated to its size and sign-extended; 0 if not readable.
static __always_inline int sdt_value(struct sdt_arg *a, u64 *regs, u64 *out)
{
	s32 size = a->size;
	u32 bytes = size < 0 ? -size : size;
	if (bytes == 0 || bytes > 8)
		return 0;
	u64 v;
	if (a->form == ARG_CONST) {
		v = a->disp;
	} else if (a->form == ARG_REG || a->form == ARG_MEM) {
		u32 r = a->reg;
		if (r >= NREGS)
			return 0;
		v = regs[r];
		if (a->form == ARG_MEM) {
			u64 m = 0;
			barrier_var(bytes);
			if (bytes > 8)
				return 0;
			if (bpf_probe_read_user(&m, bytes, (void *)(v + a->disp)))
				return 0;
			v = m;
		}
	} else {
		return 0;
	}
	if (bytes < 8) {
		u32 shift = 64 - bytes * 8;
		if (size < 0)
			v = (u64)(((s64)(v << shift)) >> shift);
		else
			v = (v << shift) >> shift;
	}
	*out = v;
	return 1;
}

SEC("uprobe")
int sdt_memory(struct pt_regs *ctx)
{
	if (!bpf_task_storage_get(&tasks, bpf_get_current_task_btf(), 0, 0))
		return 0;
	u32 cookie = bpf_get_attach_cookie(ctx);
	struct sdt_site *site = bpf_map_lookup_elem(&sdt_sites, &cookie);
	if (!site)
		return 0;
	u32 kind = site->kind;
	struct sdt_total *t = bpf_map_lookup_elem(&sdt_totals, &kind);
	if (!t)
		return 0;
	t->hits++;
	u64 regs[NREGS];
	if (bpf_probe_read_kernel(regs, sizeof(regs), ctx))
		return 0;
	u64 size;
	if (!sdt_value(&site->size, regs, &size))
		return 0;
	t->sized++;
	t->bytes += size;
	struct sdt_size_key k = { .kind = kind, .pad = 0, .size = size };
	if (!bump(&sdt_sizes, &k))
		count(CNT_SDT_SIZES_FULL);
	return 0;
}
