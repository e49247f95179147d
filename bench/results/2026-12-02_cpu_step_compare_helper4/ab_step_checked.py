#!/usr/bin/env python3
"""Interleaved A/B of sublet bench step binaries with an interference check: per run, the CPU time
other processes used during it (system busy time from /proc/stat minus the child's rusage).
usage: ab2.py OUT ROUNDS THREADS STEPS BIN..."""
import json, os, statistics, subprocess, sys, tempfile, time, resource
out, rounds, threads, steps, bins = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
def busy():
    f = open('/proc/stat').readline().split()[1:]
    v = list(map(int, f)); return (sum(v) - v[3] - v[4]) / os.sysconf('SC_CLK_TCK')
runs = {b: [] for b in bins}
for r in range(rounds):
    for b in bins:
        with tempfile.NamedTemporaryFile(suffix='.json') as f:
            env = dict(os.environ, OMP_NUM_THREADS=threads)
            b0 = busy(); t0 = time.time()
            p = subprocess.Popen([b, 'bench', 'step', '--device', 'cpu', '--model', 'resnet20', '--input', '1x28x28',
                                  '--batch-size', '128', '--steps', steps, '--json', f.name], env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            _, status, ru = os.wait4(p.pid, 0)
            wall = time.time() - t0; other = busy() - b0 - (ru.ru_utime + ru.ru_stime)
            d = json.load(open(f.name)); d = d[0] if isinstance(d, list) else d
        runs[b].append({'round': r + 1, 'other_cpu_frac': other / wall, 'ms_per_step': d['ms_per_step'],
                        'cpu_ms_per_step': d['cpu_ms_per_step']})
        print(f"{r+1} {os.path.basename(b)}: {d['ms_per_step']:.1f} ms (cpu {d['cpu_ms_per_step']:.1f}) other {other/wall:.2f}", flush=True)
summary = {}
for b in bins:
    ok = [x for x in runs[b] if x['other_cpu_frac'] < 0.1]
    wall = [x['ms_per_step'] for x in ok]; cpu = [x['cpu_ms_per_step'] for x in ok]
    if ok:
        summary[b] = {'clean_runs': len(ok), 'ms_min': min(wall), 'ms_median': statistics.median(wall),
                      'cpu_ms_min': min(cpu), 'cpu_ms_median': statistics.median(cpu)}
        print(f"{b}: clean {len(ok)}/{len(runs[b])}: ms min {min(wall):.1f} median {statistics.median(wall):.1f} | cpu min {min(cpu):.1f} median {statistics.median(cpu):.1f}")
json.dump({'threads': int(threads), 'steps': int(steps), 'rounds': rounds, 'runs': runs, 'summary': summary},
          open(out, 'w'), indent=1)
