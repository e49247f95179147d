#!/usr/bin/env bash
# A/B of two sublet binaries on the GPU: the structure checks' captured steps, the two binaries
# alternating round by round so that drift of the card's clocks lands on both:
#   scripts/gpu_ab_step.sh OLD_SUBLET NEW_SUBLET OUT [ROUNDS]   (default 5 rounds)
# Steps: ResNet-18 3x32x32 bs128 fp32 and ResNet-50 3x224x224 bs256 bf16, channels-last, CUDA
# graph. Each run's JSON goes to OUT/<model>_<old|new>_<round>.json; OUT/ab.txt gets one line per
# run and, per model, the medians, the spread of each side over its rounds and new/old.
set -uo pipefail
[ $# -ge 3 ] || { echo "usage: $0 OLD_SUBLET NEW_SUBLET OUT [ROUNDS]" >&2; exit 2; }
old="$1"; new="$2"; out="$(mkdir -p "$3" && cd "$3" && pwd)"; rounds="${4:-5}"
declare -A args=(
  [resnet18]="--model resnet18 --input 3x32x32 --batch-size 128 --classes 10 --precision fp32"
  [resnet50]="--model resnet50 --input 3x224x224 --batch-size 256 --classes 1000 --precision bf16"
)
for model in resnet18 resnet50; do
  for round in $(seq 1 "$rounds"); do
    for side in old new; do
      binary=$old; [ $side = new ] && binary=$new
      json="$out/${model}_${side}_$round.json"
      # shellcheck disable=SC2086
      timeout 120 "$binary" bench step --device cuda ${args[$model]} --channels-last --cuda-graph --steps 30 \
        --warmup 5 --json "$json" > "$out/${model}_${side}_$round.log" 2>&1
      echo "$model $side round $round rc=$? ms/step $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['ms_per_step'])" "$json" 2>/dev/null)"
    done
  done
done | tee "$out/ab.txt"
python3 - "$out" "$rounds" <<'EOF' | tee -a "$out/ab.txt"
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
for model in ("resnet18", "resnet50"):
    ms = {}
    for side in ("old", "new"):
        try:
            ms[side] = [json.load(open(f"{out}/{model}_{side}_{r}.json"))["ms_per_step"] for r in range(1, rounds + 1)]
        except (OSError, KeyError, ValueError) as e:
            print(f"{model}: {side} incomplete ({e})")
    if len(ms) == 2:
        med = {s: statistics.median(v) for s, v in ms.items()}
        spread = {s: (max(v) - min(v)) / med[s] for s, v in ms.items()}
        print(f"{model}: median old {med['old']:.3f} ms, new {med['new']:.3f} ms, new/old {med['new'] / med['old']:.4f}; "
              f"spread over rounds old {100 * spread['old']:.2f}%, new {100 * spread['new']:.2f}%")
EOF
