#!/usr/bin/env python3
"""How long a ptrace tracer's tracees stay stopped, from the scheduler's side.

    perf record -a -e sched:sched_switch -e syscalls:sys_exit_wait4 \\
        -e syscalls:sys_enter_ptrace -o DATA -- TRACER ... sh -c 'LOOP'
    perf script -i DATA > TEXT
    bench/ptrace_stopped.py TEXT THREAD     (ste-ptrace for ste, ptrace_floor for the floor)

A stop runs from the tracee switching out in state `t` to it running again. Printed, each with
the count, median, mean, p90 and sum: the stops by kind (the tracee's name and the stop's
ordinal: `sh#1` is a new task's first stop, `true#2` its exec, `true#3` its exit, `sh#9` the
shell's own stops), the time from the stop to the tracer's `wait4` returning it, and from the
tracer's `PTRACE_CONT` to the tracee running, split by whether it ran on the tracer's CPU. Unlike
bench/ptrace_stops.py, it does not trace the tracer's calls through `perf trace`, which adds
its own cost to each.
"""
import collections
import re
import statistics
import sys

LINE = re.compile(r'\s*(\S+)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s*(.*)')
SWITCH = re.compile(r'prev_comm=(.*) prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> '
                    r'next_comm=.* next_pid=(\d+)')


def show(name, values):
    if not values:
        return
    v = sorted(values)
    print(f'{name:<34} {len(v):6d}  median {statistics.median(v):7.1f} µs  '
          f'mean {statistics.mean(v):7.1f}  p90 {v[int(0.9 * len(v))]:7.1f}  '
          f'sum {sum(v) / 1e3:7.1f} ms')


def main(path, thread):
    stopped = {}            # tracee → (time it stopped, kind)
    nth = collections.Counter()
    kinds = collections.defaultdict(list)
    notice, resumed = [], collections.defaultdict(list)
    cont = {}               # tracee → (time of PTRACE_CONT, the tracer's CPU)
    for line in open(path):
        m = LINE.match(line)
        if not m:
            continue
        comm, _tid, cpu, t, event, rest = m.groups()
        t, cpu = float(t), int(cpu)
        if event.endswith('sched_switch'):
            s = SWITCH.search(rest)
            if not s:
                continue
            prev_comm, prev, state, nxt = s.group(1), int(s.group(2)), s.group(3), int(s.group(4))
            if state.startswith('t'):
                nth[prev] += 1
                stopped[prev] = (t, f'{prev_comm}#{min(nth[prev], 9)}')
            if nxt in stopped:
                t0, kind = stopped.pop(nxt)
                kinds[kind].append((t - t0) * 1e6)
            if nxt in cont:
                t0, c0 = cont.pop(nxt)
                where = "on the tracer's CPU" if c0 == cpu else 'on the other CPU'
                resumed[where].append((t - t0) * 1e6)
        elif comm.startswith(thread) and event.endswith('sys_exit_wait4'):
            r = rest.split()[-1]
            pid = int(r, 16) if r.startswith('0x') else int(r)
            if pid in stopped:
                notice.append((t - stopped[pid][0]) * 1e6)
        elif comm.startswith(thread) and event.endswith('sys_enter_ptrace'):
            req = re.search(r'request: (0x[0-9a-f]+)', rest)
            pid = re.search(r'pid: (0x[0-9a-f]+)', rest)
            if req and pid and int(req.group(1), 16) == 7:  # PTRACE_CONT
                cont[int(pid.group(1), 16)] = (t, cpu)
    total = 0.0
    for kind, v in sorted(kinds.items()):
        if len(v) >= 50:  # the loop's kinds, not the start's few
            show(f'stopped {kind}', v)
            total += sum(v)
    print(f'{"stopped in all":<34} {total / 1e3:.1f} ms')
    show('stop -> wait4 returns it', notice)
    for where, v in sorted(resumed.items()):
        show(f'CONT -> runs {where}', v)


if __name__ == '__main__':
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
