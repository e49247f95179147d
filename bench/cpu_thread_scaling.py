#!/usr/bin/env python3
"""The CPU training step on one and two threads, beside PyTorch's, in alternating rounds on a quiet machine.

Each round runs `sublet bench step --device cpu` with OMP_NUM_THREADS=1, then with 2, then
bench/pytorch_step.py with --threads 2 (and, with --baseline, a second sublet binary on 2 threads
last), so a change in what else runs on the machine hits every column alike. Timings are only
meaningful on a quiet machine, so before each round the script waits (up to --max-wait seconds)
until the 1-minute load average is below --max-load and no compiler, linker or test runner runs,
and it records, for every run, the load average before and after, the processes it saw, and the
CPU time other processes and the hypervisor (steal) took while the run lasted. A round in which
any of that fails the limits is kept in the JSON but left out of the medians.

    bench/cpu_thread_scaling.py                        # 5 rounds of resnet20 1x28x28, batch 128
    bench/cpu_thread_scaling.py --rounds 7 --baseline /path/to/old/sublet

Writes bench/results/<date>_cpu_thread_scaling/ (or --out): runs.json (every run), table.txt (the
table printed) and meta.json (machine, commit, date, command). The headline ratios are medians
over the quiet rounds of each round's ratio: sublet 2 threads / PyTorch 2 threads, and sublet
1 thread / sublet 2 threads (the second thread's speed-up); the noise is their range.

The OpenMP wait policy is each program's default (sublet's fixed spin count, libgomp's default for
PyTorch): OMP_WAIT_POLICY and GOMP_SPINCOUNT are removed from the runs' environment unless given
with --sublet-env.
"""
import argparse
import datetime
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# Processes whose presence means the machine is not quiet (other people's builds and tests).
BUSY_NAMES = ("cc1plus", "cc1", "nvcc", "cicc", "ptxas", "ctest", "ninja", "ld", "ld.lld", "clang", "clang++",
              "make", "cmake", "pytest")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def load_average():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def busy_processes():
    """Names of running processes in BUSY_NAMES (this script's children excluded: none are)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue
        if name in BUSY_NAMES:
            found.append(name)
    return sorted(found)


def cpu_seconds():
    """(busy, steal) seconds of all CPUs since boot, from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq) / CLOCK_TICKS, steal / CLOCK_TICKS


def children_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def wait_until_quiet(max_load, max_wait):
    """Waits until the 1-minute load is below max_load and no busy process runs; False after max_wait s."""
    deadline = time.monotonic() + max_wait
    while True:
        load, busy = load_average(), busy_processes()
        if load[0] < max_load and not busy:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(5)


def run_once(label, command, env, json_path):
    """Runs one benchmark; returns its result with the machine's state around it."""
    before = {"load": load_average(), "busy": busy_processes()}
    busy0, steal0 = cpu_seconds()
    child0 = children_cpu_seconds()
    wall0 = time.monotonic()
    done = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.monotonic() - wall0
    busy1, steal1 = cpu_seconds()
    child = children_cpu_seconds() - child0
    after = {"load": load_average(), "busy": busy_processes()}
    if done.returncode != 0:
        sys.exit(f"error: {label} failed ({done.returncode}):\n{done.stdout}")
    with open(json_path) as f:
        result = json.load(f)
    result = result[0] if isinstance(result, list) else result
    return {"label": label, "command": command, "ms_per_step": result["ms_per_step"],
            "cpu_ms_per_step": result.get("cpu_ms_per_step"), "threads": result.get("threads"),
            "step_ms": result.get("step_ms"), "before": before, "after": after, "process_wall_s": wall,
            # CPU time of everything else on the machine (other processes, the kernel) while it ran,
            # in cores: 0.0 on a quiet machine, 1.0 = one core's worth taken.
            "foreign_cores": max(0.0, (busy1 - busy0) - child) / wall, "steal_cores": (steal1 - steal0) / wall}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sublet", default=os.path.join(HERE, "..", "build", "sublet"))
    parser.add_argument("--baseline", help="a second sublet binary, run on 2 threads as a fourth column")
    parser.add_argument("--python", default="/usr/bin/python3", help="a python3 with torch (Debian's PyTorch 1.13)")
    parser.add_argument("--model", default="resnet20")
    parser.add_argument("--input", default="1x28x28")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--max-load", type=float, default=0.3, help="1-minute load average a round may start at")
    parser.add_argument("--max-wait", type=float, default=300, help="seconds to wait for a quiet machine per round")
    parser.add_argument("--max-foreign", type=float, default=0.05,
                        help="cores' worth of CPU others may take during a run of a quiet round")
    parser.add_argument("--max-steal", type=float, default=0.05,
                        help="cores' worth of CPU the hypervisor may steal during a run of a quiet round")
    parser.add_argument("--sublet-env", action="append", default=[], metavar="NAME=VALUE",
                        help="set in the sublet runs' environment (e.g. GOMP_SPINCOUNT=0)")
    parser.add_argument("--out", help="results folder (default bench/results/<date>_cpu_thread_scaling)")
    args = parser.parse_args()
    if args.rounds < 1:
        sys.exit(f"error: --rounds must be at least 1, found {args.rounds}")
    for path in [args.sublet] + ([args.baseline] if args.baseline else []):
        if not os.access(path, os.X_OK):
            sys.exit(f"error: {path} is not an executable sublet binary")

    date = datetime.date.today().isoformat()
    out = args.out or os.path.join(HERE, "results", f"{date}_cpu_thread_scaling")
    os.makedirs(out, exist_ok=True)
    scratch = tempfile.mkdtemp()
    base_env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_NUM_THREADS")}
    sublet_env = dict(base_env)
    for item in args.sublet_env:
        name, sep, value = item.partition("=")
        if not sep or not name:
            sys.exit(f"error: --sublet-env expects NAME=VALUE, found '{item}'")
        sublet_env[name] = value
    shape = ["--model", args.model, "--input", args.input, "--batch-size", str(args.batch_size),
             "--steps", str(args.steps), "--warmup", str(args.warmup)]

    def sublet_run(binary, threads, label, json_path):
        return label, [binary, "bench", "step", "--device", "cpu", *shape, "--json", json_path], \
            dict(sublet_env, OMP_NUM_THREADS=str(threads)), json_path

    rounds = []
    for r in range(1, args.rounds + 1):
        quiet_at_start = wait_until_quiet(args.max_load, args.max_wait)
        runs = {}
        plan = [sublet_run(args.sublet, 1, "sublet_1t", f"{scratch}/s1_{r}.json"),
                sublet_run(args.sublet, 2, "sublet_2t", f"{scratch}/s2_{r}.json"),
                ("pytorch_2t", [args.python, os.path.join(HERE, "pytorch_step.py"), "--device", "cpu", *shape,
                                "--threads", "2", "--json", f"{scratch}/p2_{r}.json"],
                 dict(base_env, OMP_NUM_THREADS="2"), f"{scratch}/p2_{r}.json")]
        if args.baseline:
            plan.append(sublet_run(args.baseline, 2, "baseline_2t", f"{scratch}/b2_{r}.json"))
        for label, command, env, json_path in plan:
            runs[label] = run_once(label, command, env, json_path)
        reasons = []
        if not quiet_at_start:
            reasons.append(f"load {load_average()[0]:.2f} or busy processes after waiting {args.max_wait:.0f} s")
        for run in runs.values():
            if run["before"]["busy"] or run["after"]["busy"]:
                reasons.append(f"{run['label']}: {sorted(set(run['before']['busy'] + run['after']['busy']))} running")
            if run["foreign_cores"] > args.max_foreign:
                reasons.append(f"{run['label']}: others took {run['foreign_cores']:.2f} cores")
            if run["steal_cores"] > args.max_steal:
                reasons.append(f"{run['label']}: the hypervisor stole {run['steal_cores']:.2f} cores")
        first_load = runs["sublet_1t"]["before"]["load"][0]
        if first_load >= args.max_load:
            reasons.append(f"load {first_load:.2f} at the round's start")
        entry = {"round": r, "quiet": not reasons, "discarded_because": reasons, "runs": runs,
                 "ratio_2t_to_pytorch": runs["sublet_2t"]["ms_per_step"] / runs["pytorch_2t"]["ms_per_step"],
                 "speedup_2t_over_1t": runs["sublet_1t"]["ms_per_step"] / runs["sublet_2t"]["ms_per_step"]}
        if args.baseline:
            entry["ratio_2t_to_baseline"] = runs["sublet_2t"]["ms_per_step"] / runs["baseline_2t"]["ms_per_step"]
        rounds.append(entry)
        print(f"round {r}/{args.rounds}: {'quiet' if entry['quiet'] else 'DISCARDED (' + '; '.join(reasons) + ')'}",
              flush=True)

    columns = ["sublet_1t", "sublet_2t", "pytorch_2t"] + (["baseline_2t"] if args.baseline else [])
    lines = []
    header = f"{'round':>5} {'load':>11} {'others':>6} {'steal':>5} | " + " ".join(f"{c:>11}" for c in columns) + \
        f" | {'2t/torch':>8} {'1t/2t':>6}" + (f" {'2t/base':>7}" if args.baseline else "") + "  kept"
    lines.append(header)
    for e in rounds:
        runs = e["runs"]
        loads = [x["before"]["load"][0] for x in runs.values()] + [x["after"]["load"][0] for x in runs.values()]
        others = max(x["foreign_cores"] for x in runs.values())
        steal = max(x["steal_cores"] for x in runs.values())
        line = f"{e['round']:>5} {min(loads):>5.2f}-{max(loads):<5.2f} {others:>6.3f} {steal:>5.3f} | " + \
            " ".join(f"{runs[c]['ms_per_step']:>11.1f}" for c in columns) + \
            f" | {e['ratio_2t_to_pytorch']:>8.3f} {e['speedup_2t_over_1t']:>6.2f}" + \
            (f" {e['ratio_2t_to_baseline']:>7.3f}" if args.baseline else "") + ("  yes" if e["quiet"] else "  no")
        lines.append(line)
    kept = [e for e in rounds if e["quiet"]]
    summary = {"rounds": len(rounds), "quiet_rounds": len(kept)}
    if kept:
        def stats(values):
            return {"median": statistics.median(values), "min": min(values), "max": max(values), "values": values}
        summary["ms_per_step"] = {c: stats([e["runs"][c]["ms_per_step"] for e in kept]) for c in columns}
        summary["ratio_2t_to_pytorch"] = stats([e["ratio_2t_to_pytorch"] for e in kept])
        summary["speedup_2t_over_1t"] = stats([e["speedup_2t_over_1t"] for e in kept])
        if args.baseline:
            summary["ratio_2t_to_baseline"] = stats([e["ratio_2t_to_baseline"] for e in kept])
        lines.append("")
        lines.append(f"median of {len(kept)} quiet rounds (of {len(rounds)}): " +
                     ", ".join(f"{c} {summary['ms_per_step'][c]['median']:.1f} ms" for c in columns))
        for key, text in (("ratio_2t_to_pytorch", "sublet 2 threads / PyTorch 2 threads"),
                          ("speedup_2t_over_1t", "sublet 1 thread / sublet 2 threads"),
                          ("ratio_2t_to_baseline", "sublet 2 threads / baseline 2 threads")):
            if key in summary:
                s = summary[key]
                lines.append(f"  {text}: {s['median']:.3f} (rounds {s['min']:.3f}-{s['max']:.3f})")
    else:
        lines.append("")
        lines.append("no quiet round: nothing to summarise")
    lines.append("load: 1-minute load average before and after the round's runs; others: the most CPU (in cores) "
                 "other processes took during one of its runs; steal: the same for the hypervisor")
    table = "\n".join(lines)
    print(table)

    commit = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "-C", HERE, "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                           text=True).stdout.strip() != ""
    model_name = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                      platform.processor())
    torch_version = subprocess.run([args.python, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                                   text=True).stdout.strip()
    meta = {"machine": f"{model_name}, {os.cpu_count()} CPUs, {platform.platform()}",
            "commit": commit + ("+uncommitted changes" if dirty else ""), "date": date,
            "command": " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]),
            "pytorch": torch_version, "sublet_env": args.sublet_env,
            "quiet_rule": {"max_load": args.max_load, "max_foreign_cores": args.max_foreign,
                           "max_steal_cores": args.max_steal, "busy_names": BUSY_NAMES}}
    with open(os.path.join(out, "runs.json"), "w") as f:
        json.dump({"meta": meta, "summary": summary, "rounds": rounds}, f, indent=1)
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    with open(os.path.join(out, "table.txt"), "w") as f:
        f.write(table + "\n")
    print(f"results: {out}")


if __name__ == "__main__":
    main()
