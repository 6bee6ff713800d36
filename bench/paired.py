#!/usr/bin/env python3
"""Paired timing of commands against a baseline, for budgets stated as "≤ R× bare".

Why not hyperfine alone: on this kind of VM the speed of the host drifts by up to 2× over
seconds (the same malloc loop takes 256 ms in one run and 650 ms in the next, with no CPU
steal shown), and hyperfine runs all the rounds of one command before the next command, so
each command sees a different machine and the ratios of their means carry ±40 %. Here every
round runs each command once, in a fresh random order, and the ratio is taken within the
round, where the machine is the same for all; the figure is the median of those per-round
ratios with a 95 % bootstrap interval, next to the ratio of the minimums (each command at
the machine's fastest). For additive budgets ("≤ 5 ms more than bare") the last column is
the median of the per-round differences, with its 95 % bootstrap interval. For budgets against
another command than the baseline ("within 2 % of its floor"), `--against A/B` gives the median
of A's per-round ratios to B the same way; `--reread FILE` gives them for a run already
written with `--json`, without running anything.

    bench/paired.py [--runs N] [--warmup W] [--prepare CMD] [--json FILE] \\
        [--against NAME/NAME ...] NAME=COMMAND NAME=COMMAND ...
    bench/paired.py --reread FILE --against NAME/NAME ...

The first command is the baseline. A COMMAND is split like a shell would (shlex), and run
without a shell; write `sh -c '…'` for shell syntax. Its stdout and stderr go to /dev/null.
Wall time is timed around fork and wait4; user and system CPU come from wait4's rusage (the
command and every descendant it waited for). A command that exits non-zero stops the
benchmark: a failing run measures nothing.
"""
import argparse
import json
import os
import random
import shlex
import statistics
import subprocess
import sys
import time


def run_once(argv):
    """Runs argv once; returns (wall seconds, user seconds, sys seconds)."""
    t0 = time.perf_counter()
    pid = os.posix_spawnp(argv[0], argv, os.environ, file_actions=[
        (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
        (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
    ])
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"paired: `{shlex.join(argv)}` exited with {code}: a failing run measures nothing")
    return wall, ru.ru_utime, ru.ru_stime


def bootstrap_ci(values, reps=4000, seed=1):
    """95 % interval of the median of `values`, by resampling them."""
    rng = random.Random(seed)
    n = len(values)
    meds = sorted(statistics.median(rng.choices(values, k=n)) for _ in range(reps))
    return meds[int(0.025 * reps)], meds[int(0.975 * reps) - 1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=15, help="rounds (each runs every command once)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed rounds first")
    ap.add_argument("--prepare", help="shell command run before every timed command")
    ap.add_argument("--json", help="write every time and the summary here")
    ap.add_argument("--title", default="", help="a heading for the table")
    ap.add_argument("--against", action="append", default=[], metavar="A/B",
                    help="also the median of A's per-round ratios to B (repeatable)")
    ap.add_argument("--reread", metavar="FILE",
                    help="run nothing: the --against figures of a run written with --json")
    ap.add_argument("commands", nargs="*", metavar="NAME=COMMAND")
    a = ap.parse_args()
    pairs = []
    for p in a.against:
        x, sep, y = p.partition("/")
        if not sep or not x or not y:
            ap.error(f"--against expects A/B, two command names, got {p!r}")
        pairs.append((x, y))
    if a.reread:
        if a.commands or not pairs:
            ap.error("--reread takes --against pairs and no commands")
        with open(a.reread) as f:
            walls = {c["name"]: c["wall_s"] for c in json.load(f)["commands"]}
        against(walls, pairs, ap)
        return
    cmds = []
    for c in a.commands:
        name, sep, cmd = c.partition("=")
        if not sep or not cmd:
            ap.error(f"expected NAME=COMMAND, got {c!r}")
        cmds.append((name, shlex.split(cmd)))
    if len(cmds) < 2:
        ap.error("give a baseline and at least one command to compare with it")
    check_names([name for name, _ in cmds], pairs, ap)  # before the rounds, not after them

    def one(argv):
        if a.prepare:
            subprocess.run(a.prepare, shell=True, check=True, stdout=subprocess.DEVNULL)
        return run_once(argv)

    rng = random.Random()
    for _ in range(a.warmup):
        for _, argv in cmds:
            one(argv)
    rounds = []  # per round: {name: (wall, user, sys)}
    for _ in range(a.runs):
        order = list(range(len(cmds)))
        rng.shuffle(order)
        r = {}
        for i in order:
            r[cmds[i][0]] = one(cmds[i][1])
        rounds.append(r)

    base = cmds[0][0]
    summary = []
    if a.title:
        print(f"### {a.title}\n")
    print(f"{a.runs} rounds, each command once per round in random order; baseline: {base}\n")
    print("| command | median wall | min wall | user+sys (median) | × baseline: median of per-round ratios [95 % CI] | × baseline: min/min | − baseline: median of per-round differences [95 % CI] | CPU × baseline: median of per-round ratios [95 % CI] |")
    print("|---|---|---|---|---|---|---|---|")
    for name, argv in cmds:
        walls = [r[name][0] for r in rounds]
        cpu = [r[name][1] + r[name][2] for r in rounds]
        ratios = [r[name][0] / r[base][0] for r in rounds]
        med = statistics.median(ratios)
        lo, hi = bootstrap_ci(ratios)
        mins = min(walls) / min(r[base][0] for r in rounds)
        diffs = [r[name][0] - r[base][0] for r in rounds]
        dmed = statistics.median(diffs)
        dlo, dhi = bootstrap_ci(diffs)
        # CPU (user + sys of the command's tree, ste included when it runs it): what a cost
        # such as accounting adds, less mixed with the scheduling noise of wall time.
        cpu_ratios = [(r[name][1] + r[name][2]) / (r[base][1] + r[base][2])
                      for r in rounds if r[base][1] + r[base][2] > 0]
        cmed, (clo, chi) = ((statistics.median(cpu_ratios), bootstrap_ci(cpu_ratios))
                            if cpu_ratios else (float("nan"), (float("nan"), float("nan"))))
        print(f"| {name} | {statistics.median(walls)*1e3:,.1f} ms | {min(walls)*1e3:,.1f} ms | "
              f"{statistics.median(cpu)*1e3:,.1f} ms | {med:.3f} [{lo:.3f}, {hi:.3f}] | {mins:.3f} | "
              f"{dmed*1e3:+,.2f} ms [{dlo*1e3:+,.2f}, {dhi*1e3:+,.2f}] | "
              f"{cmed:.3f} [{clo:.3f}, {chi:.3f}] |")
        summary.append({"name": name, "command": shlex.join(argv), "wall_s": walls, "cpu_s": cpu,
                        "ratio_median": med, "ratio_ci95": [lo, hi], "ratio_of_minimums": mins,
                        "diff_median_s": dmed, "diff_ci95_s": [dlo, dhi],
                        "cpu_ratio_median": cmed, "cpu_ratio_ci95": [clo, chi]})
    walls = {name: [r[name][0] for r in rounds] for name, _ in cmds}
    if pairs:
        print()
    against_rows = against(walls, pairs, ap)
    if a.json:
        os.makedirs(os.path.dirname(a.json) or ".", exist_ok=True)
        with open(a.json, "w") as f:
            json.dump({"runs": a.runs, "baseline": base, "commands": summary,
                       "against": against_rows}, f, indent=1)


def check_names(names, pairs, ap):
    """Stops with a usage error when an --against pair names no command."""
    for n in (n for pair in pairs for n in pair):
        if n not in names:
            ap.error(f"--against: no command named {n!r} (there are: {', '.join(names)})")


def against(walls, pairs, ap):
    """Prints, for each (A, B), the median of A's per-round wall ratios to B with its 95 %
    bootstrap interval (rounds are paired by index); returns them for the JSON."""
    check_names(list(walls), pairs, ap)
    rows = []
    for x, y in pairs:
        ratios = [p / q for p, q in zip(walls[x], walls[y])]
        med = statistics.median(ratios)
        lo, hi = bootstrap_ci(ratios)
        print(f"- {x} × {y}: {med:.3f} [{lo:.3f}, {hi:.3f}], median of {len(ratios)} "
              f"per-round ratios [95 % CI]")
        rows.append({"a": x, "b": y, "ratio_median": med, "ratio_ci95": [lo, hi]})
    return rows


if __name__ == "__main__":
    main()
