#!/usr/bin/env bash
# The CPU training step of sublet against PyTorch's in one run, repeated: ROUNDS rounds, each
# `sublet bench step --device cpu` and then bench/pytorch_step.py --device cpu with the same
# arguments, so a change in what else runs on the machine hits both sides alike. Prints a table
# (per round and the medians over rounds) and writes one JSON file with every run, the load
# average before each run, and the summary.
#
#   bench/cpu_step_compare.sh                      # the default row: resnet20, 1x28x28, batch 128
#   bench/cpu_step_compare.sh --model resnet20 --input 3x32x32 --batch-size 64
#
# The ratio is sublet / PyTorch (below 1: sublet is faster). Headline: the median over rounds of
# each round's ratio (the two runs of a round are seconds apart); the ratio of the two medians
# is printed beside it. cpu ms: process CPU time per step, all threads (OpenMP threads that spin
# while waiting count too). Without arguments it runs the default row with --steps 20.
# SUBLET: the sublet binary (default build/sublet). PYTHON: a Python with torch (default: the
# first of python3, /usr/bin/python3 that imports it). ROUNDS (default 5). OUT: the JSON file
# (default: cpu_step_compare.json in a temporary folder). Both sides see the same environment
# (OMP_NUM_THREADS: sublet's OpenMP threads; PyTorch's default thread count follows it too).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/step_tools.sh"  # sets sublet and python
rounds="${ROUNDS:-5}"
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "error: ROUNDS must be a positive integer, found '$rounds'" >&2; exit 1; }
for arg in "$@"; do
  [[ "$arg" == --json* || "$arg" == --device* ]] && {
    echo "error: cpu_step_compare.sh sets --device cpu and writes the JSON itself (see OUT); found $arg" >&2; exit 1; }
done
args=("$@")
[[ ${#args[@]} -eq 0 ]] && args=(--model resnet20 --input 1x28x28 --batch-size 128 --steps 20)
out="${OUT:-$(mktemp -d)/cpu_step_compare.json}"
mkdir -p "$(dirname "$out")"
runs="$(mktemp -d)"

for ((round = 1; round <= rounds; ++round)); do
  cut -d' ' -f1-3 /proc/loadavg > "$runs/load_sublet_$round"
  "$sublet" bench step --device cpu "${args[@]}" --json "$runs/sublet_$round.json" > /dev/null
  cut -d' ' -f1-3 /proc/loadavg > "$runs/load_pytorch_$round"
  "$python" "$here/pytorch_step.py" --device cpu "${args[@]}" --json "$runs/pytorch_$round.json" > /dev/null
  echo "round $round of $rounds done (load average $(cut -d' ' -f1-3 /proc/loadavg))"
done

"$python" - "$runs" "$rounds" "$out" "$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  "${args[@]}" <<'PY'
import datetime, json, os, statistics, sys

runs, rounds, out, commit, args = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]

def load(name):
    data = json.load(open(os.path.join(runs, name)))
    return data if isinstance(data, list) else [data]

def loadavg(name):
    return [float(x) for x in open(os.path.join(runs, name)).read().split()]

rows = []  # one per (round, model)
for r in range(1, rounds + 1):
    for s, t in zip(load(f"sublet_{r}.json"), load(f"pytorch_{r}.json")):
        rows.append({"round": r, "model": s["model"], "batch_size": s["batch_size"], "input": s["input"],
                     "sublet": s, "pytorch": t,
                     "load_before_sublet": loadavg(f"load_sublet_{r}"),
                     "load_before_pytorch": loadavg(f"load_pytorch_{r}"),
                     "ratio_ms": s["ms_per_step"] / t["ms_per_step"],
                     "ratio_cpu_ms": s["cpu_ms_per_step"] / t["cpu_ms_per_step"]})

print(f"{'round':>5} {'model':<10} {'batch':>5} {'input':>9} {'load':>5} | {'sublet ms':>9} {'torch ms':>9} {'ratio':>6} |"
      f" {'sublet cpu':>10} {'torch cpu':>10} {'ratio':>6}")
for row in rows:
    s, t = row["sublet"], row["pytorch"]
    print(f"{row['round']:>5} {row['model']:<10} {row['batch_size']:>5} {row['input']:>9} {row['load_before_sublet'][0]:>5.2f} |"
          f" {s['ms_per_step']:>9.1f} {t['ms_per_step']:>9.1f} {row['ratio_ms']:>6.2f} |"
          f" {s['cpu_ms_per_step']:>10.1f} {t['cpu_ms_per_step']:>10.1f} {row['ratio_cpu_ms']:>6.2f}")

summary = []
for model in dict.fromkeys(row["model"] for row in rows):
    mine = [row for row in rows if row["model"] == model]
    med = lambda f: statistics.median(f(row) for row in mine)
    entry = {"model": model, "batch_size": mine[0]["batch_size"], "input": mine[0]["input"], "rounds": len(mine),
             "threads": mine[0]["sublet"].get("threads"), "pytorch_threads": mine[0]["pytorch"].get("threads"),
             "sublet_ms": med(lambda row: row["sublet"]["ms_per_step"]),
             "pytorch_ms": med(lambda row: row["pytorch"]["ms_per_step"]),
             "sublet_cpu_ms": med(lambda row: row["sublet"]["cpu_ms_per_step"]),
             "pytorch_cpu_ms": med(lambda row: row["pytorch"]["cpu_ms_per_step"]),
             "ratio_ms": med(lambda row: row["ratio_ms"]),
             "ratio_cpu_ms": med(lambda row: row["ratio_cpu_ms"]),
             "load_min": min(row["load_before_sublet"][0] for row in mine),
             "load_max": max(row["load_before_sublet"][0] for row in mine)}
    entry["ratio_of_medians_ms"] = entry["sublet_ms"] / entry["pytorch_ms"]
    summary.append(entry)

print()
print(f"{'median':<16} {'batch':>5} {'input':>9} {'load':>11} | {'sublet ms':>9} {'torch ms':>9} {'ratio':>6} {'(of med)':>8} |"
      f" {'sublet cpu':>10} {'torch cpu':>10} {'ratio':>6}")
for e in summary:
    print(f"{e['model']:<16} {e['batch_size']:>5} {e['input']:>9} {e['load_min']:>5.2f}-{e['load_max']:<5.2f} |"
          f" {e['sublet_ms']:>9.1f} {e['pytorch_ms']:>9.1f} {e['ratio_ms']:>6.2f} {e['ratio_of_medians_ms']:>8.2f} |"
          f" {e['sublet_cpu_ms']:>10.1f} {e['pytorch_cpu_ms']:>10.1f} {e['ratio_cpu_ms']:>6.2f}")
print(f"ratio = sublet / {rows[0]['pytorch']['framework']}: median over {rounds} rounds of each round's ratio "
      f"(of med: ratio of the two medians); ms: median step wall time of a run; cpu: process CPU ms per step; "
      f"load: 1-minute load average before the sublet runs ({os.cpu_count()} CPUs)")

json.dump({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "commit": commit,
           "args": args, "cpus": os.cpu_count(), "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
           "summary": summary, "rounds": rows}, open(out, "w"), indent=2)
print(f"JSON: {out}")
PY
