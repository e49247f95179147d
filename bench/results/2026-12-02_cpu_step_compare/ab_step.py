#!/usr/bin/env python3
"""Interleaved A/B of `sublet bench step` binaries: ROUNDS rounds, each binary once per round in turn;
writes JSON with every run's ms/step, CPU ms/step and the load average before it, and prints min/median."""
import json, os, statistics, subprocess, sys, tempfile, datetime
out, rounds, threads, steps, bins = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
runs = {b: [] for b in bins}
for r in range(rounds):
    for b in bins:
        load = open('/proc/loadavg').read().split()[:3]
        with tempfile.NamedTemporaryFile(suffix='.json') as f:
            env = dict(os.environ, OMP_NUM_THREADS=threads)
            subprocess.run([b, 'bench', 'step', '--device', 'cpu', '--model', 'resnet20', '--input', '1x28x28',
                            '--batch-size', '128', '--steps', steps, '--json', f.name], env=env, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            d = json.load(open(f.name)); d = d[0] if isinstance(d, list) else d
        runs[b].append({'round': r + 1, 'load_before': [float(x) for x in load], 'ms_per_step': d['ms_per_step'],
                        'cpu_ms_per_step': d['cpu_ms_per_step']})
summary = {}
for b in bins:
    cpu = [x['cpu_ms_per_step'] for x in runs[b]]; wall = [x['ms_per_step'] for x in runs[b]]
    summary[b] = {'cpu_ms_min': min(cpu), 'cpu_ms_median': statistics.median(cpu), 'ms_min': min(wall),
                  'ms_median': statistics.median(wall)}
    print(f"{b}: cpu ms/step min {min(cpu):.1f} median {statistics.median(cpu):.1f} | ms/step min {min(wall):.1f} "
          f"median {statistics.median(wall):.1f}")
json.dump({'date': datetime.datetime.utcnow().isoformat() + 'Z', 'threads': int(threads), 'steps': int(steps),
           'rounds': rounds, 'command': 'sublet bench step --device cpu --model resnet20 --input 1x28x28 --batch-size 128',
           'runs': runs, 'summary': summary}, open(out, 'w'), indent=1)
