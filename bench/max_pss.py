#!/usr/bin/env python3
"""Max PSS against the truth on the seed's examples (issue 20), per tracker and privilege.

    bench/max_pss.py STE [--runs 5] [--modes ebpf,ptrace,ptrace-nobody,netlink]

Builds bench/max_pss_workloads.c with gcc -O0 (as the article built fill.c), runs each example
RUNS times under each mode with `--json`, and prints for each: Max PSS min / median / max as an
error against the truth (1 GiB, 2 GiB, 64 x 8 MiB), how the peak was read (exact, carried,
exit_peak), and the sampler's CPU as a share of wall (its budget is 1 % of a core plus a 1 ms
start-up allowance). `ptrace-nobody` runs ste as nobody (setpriv), which needs root.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MIB = 1 << 20
EXAMPLES = [
    ("fill", ["fill"], 1024 * MIB),
    ("fillfill", ["fillfill"], 2048 * MIB),
    ("64 threads x 8 MiB, 5 ms", ["threads", "64", "8", "5"], 512 * MIB),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ste")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--modes", default="ebpf,ptrace,ptrace-nobody,netlink")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ste-maxpss-")
    os.chmod(work, 0o755)
    prog = os.path.join(work, "workloads")
    subprocess.run(["gcc", "-O0", "-pthread", "-o", prog,
                    os.path.join(HERE, "max_pss_workloads.c")], check=True)
    ste = os.path.join(work, "ste")
    shutil.copy(a.ste, ste)
    print(f"{'example':28} {'mode':14} {'min':>8} {'median':>8} {'max':>8}  {'peak read':24} {'sampler CPU':>12}")
    for name, args, truth in EXAMPLES:
        for mode in a.modes.split(","):
            errs, kinds, cpu = [], [], []
            for i in range(a.runs):
                out = os.path.join(work, f"run-{i}.json")
                tracker = mode.split("-")[0]
                cmd = [ste, "--tracker", tracker, "--json", out, "--", prog] + args
                if mode.endswith("-nobody"):
                    if os.path.exists(out):
                        os.remove(out)
                    os.chmod(work, 0o777)
                    cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] + cmd
                r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                if r.returncode != 0:
                    sys.exit(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stderr.decode()}")
                run = json.load(open(out))
                pss = run["totals"]["max_pss_bytes"]
                errs.append((pss - truth) / truth * 100 if pss is not None else float("nan"))
                at = run["totals"]["max_pss_t_ns"]
                kinds.append(next((s.get("kind", "exact") for s in run["samples"]
                                   if s["t_ns"] == at and s["pss_bytes"] == pss), "n/a"))
                cpu.append(run["sampler"]["cpu_ns"] / run["totals"]["wall_ns"] * 100)
            kind = ", ".join(f"{k} {kinds.count(k)}" for k in sorted(set(kinds)))
            print(f"{name:28} {mode:14} {min(errs):+7.2f}% {statistics.median(errs):+7.2f}% "
                  f"{max(errs):+7.2f}%  {kind:24} {statistics.median(cpu):10.2f} %")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
