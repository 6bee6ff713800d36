#!/usr/bin/env python3
# Per-stop latency of a ptrace tracer on the fork loop, from `perf trace -e wait4,ptrace -o FILE`:
# the time from wait4 returning a stopped tracee to the PTRACE_CONT/LISTEN that restarts it, by
# kind of stop (told apart by the tracee's name: `sh` before its exec, `true` after). perf trace
# adds its own cost to each traced call, so compare tracers measured the same way.
#   bench/ptrace_stops.py TRACE_FILE THREAD_NAME   (ste-ptrace for ste, ptrace_floor for the floor)
import re, sys, statistics
thread = sys.argv[2]
head = re.compile(r'^\s*([\d.]+) \(\s*([\d.]*) ms\): (\S+)/(\d+)\s+(.*)$')
lines = open(sys.argv[1]).read().splitlines()
# The tracer's thread by its id: perf trace names a thread by the comm it knew when it first saw
# it, and later lines of ste's tracer show its process's name (`ste`) instead of `ste-ptrace`.
tids = {m.group(4) for m in map(head.match, lines) if m and m.group(3).startswith(thread)}
pending = {}
lat = {}
for line in lines:
    m = head.match(line)
    if not m or m.group(4) not in tids: continue
    t, dur, rest = float(m.group(1)), float(m.group(2) or 0), m.group(5)
    cont = rest.startswith('... [continued]: ')
    if cont: rest = rest[len('... [continued]: '):]
    call = rest.split('(')[0]
    if call == 'wait4':
        r = re.search(r'= (\d+) \((\S+)\)\s*$', rest)
        if r: pending[int(r.group(1))] = [t + dur, r.group(2), False]
    elif call == 'ptrace' and not cont:
        rq = re.search(r'request: (\d+)', rest); pd = re.search(r'pid: (\d+)', rest)
        if not rq or not pd: continue
        req, pid = int(rq.group(1)), int(pd.group(1))
        p = pending.get(pid)
        if not p: continue
        if req == 0x4201: p[2] = True; continue
        if req not in (7, 0x4208, 24): continue
        data = re.search(r'data: (\d+)', rest)
        if req == 7 and data and 0 < int(data.group(1)) < 65: kind = 'signal'
        elif p[2]: kind = 'exec' if p[1] != 'sh' else 'fork'
        else: kind = 'exit' if p[1] != 'sh' else 'first'
        lat.setdefault(kind, []).append((t - p[0]) * 1000)
        del pending[pid]
tot = 0
for k, v in sorted(lat.items()):
    v.sort(); tot += sum(v)
    print(f"{k:7} {len(v):6} stops  mean {statistics.mean(v):7.1f} µs  median {v[len(v)//2]:7.1f}  p90 {v[int(len(v)*.9)]:7.1f}  sum {sum(v)/1000:7.1f} ms")
print(f"all stops: {tot/1000:.1f} ms")
