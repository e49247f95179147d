#!/usr/bin/env python3
"""bench/pytorch_step.py runs exactly the shapes of a schedule `sublet bench step` wrote: the same
timed tokens, longest window and FLOPs per token for a GPT model, the same timed images for an image
model, and its allocator sweep gives one row per setting (a process each; on the CPU PyTorch keeps
no allocator statistics, so only the time is filled). Needs a python3 with torch.
Usage: pytorch_step_schedule_check.py SUBLET_BINARY"""
import json
import os
import subprocess
import sys
import tempfile

sublet = sys.argv[1]
script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "pytorch_step.py")
env = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="passive")
failures = []


def run(command):
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        print(" ".join(command), done.stdout, done.stderr, sep="\n")
        sys.exit(1)
    return done


def expect(what, a, b):
    if a != b:
        failures.append(f"{what}: sublet {a!r}, pytorch {b!r}")


with tempfile.TemporaryDirectory() as work:
    def path(name):
        return os.path.join(work, name)

    steps = ["--warmup", "1", "--steps", "3"]
    run([sublet, "bench", "step", "--device", "cpu", "--model", "gpt-nano", "--vocab", "256", "--block-size", "128",
         "--seq-len-range", "8:128", "--tokens-per-batch", "512", "--seed", "5", "--write-shape-schedule",
         path("tokens.json"), "--json", path("sublet_gpt.json")] + steps)
    run([sys.executable, script, "--device", "cpu", "--model", "gpt-nano", "--vocab", "256", "--block-size", "128",
         "--shape-schedule", path("tokens.json"), "--json", path("torch_gpt.json")] + steps)
    a, b = (json.load(open(path(n))) for n in ("sublet_gpt.json", "torch_gpt.json"))
    for key in ("timed_samples", "seq_len", "flops_per_token", "input"):
        expect(f"gpt-nano {key}", a[key], b[key])

    run([sublet, "bench", "step", "--device", "cpu", "--model", "resnet20", "--input", "3x8x8", "--batch-size", "2",
         "--resolutions", "8,16", "--write-shape-schedule", path("images.json"), "--json", path("sublet_img.json")]
        + steps)
    run([sys.executable, script, "--device", "cpu", "--model", "resnet20", "--shape-schedule", path("images.json"),
         "--json", path("torch_img.json")] + steps)
    a, b = (json.load(open(path(n))) for n in ("sublet_img.json", "torch_img.json"))
    expect("resnet20 timed_samples", a["timed_samples"], b["timed_samples"])

    run([sys.executable, script, "--device", "cpu", "--model", "gpt-nano", "--vocab", "256", "--block-size", "128",
         "--shape-schedule", path("tokens.json"), "--alloc-conf-sweep=pytorch;expandable_segments:True",
         "--json", path("sweep.json")] + steps)
    sweep = json.load(open(path("sweep.json")))
    expect("sweep labels", ["pytorch", "expandable_segments:True"], [r["label"] for r in sweep["rows"]])
    expect("sweep rows timed", [True, True], [(r["us_per_token"] or 0) > 0 for r in sweep["rows"]])

    # The sublet_torch setting runs its process with sublet's allocator installed (and no PyTorch setting).
    dry = subprocess.run([sys.executable, script, "--device", "cpu", "--model", "gpt-nano",
                          "--alloc-conf-sweep=expandable_segments:True;sublet_torch", "--sweep-dry-run"],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    expect("sublet_torch in its process only", [False, True], [line.endswith("--allocator sublet") for line in dry])
    expect("no PyTorch setting beside sublet_torch", ["PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
                                                      "PYTORCH_CUDA_ALLOC_CONF="], [line.split()[0] for line in dry])

for failure in failures:
    print(failure)
print("pytorch_step.py ran sublet's schedules" if not failures else f"{len(failures)} mismatches")
sys.exit(1 if failures else 0)
