#!/usr/bin/env python3
"""The PyTorch baseline of `sublet bench step`: the same models and the same training step.

    python3 bench/pytorch_step.py [--device cpu|cuda|auto] --model M[,M...] [--input CxHxW]
        [--batch-size B] [--classes K] [--steps N] [--warmup W] [--small-input-stem] [--seed S]
        [--threads T] [--cuda-graph] [--precision fp32|bf16|fp16] [--channels-last] [--json PATH]
        [--seq-len N] [--vocab V] [--block-size N] [--compile]                  (GPT models)
        [--shape-schedule FILE] [--alloc-conf-sweep [LIST]] [--snapshot-dir DIR]
        [--allocator pytorch|sublet]

Step: forward, cross-entropy, backward, SGD(lr 0.1, momentum 0.9) step, zero_grad(set_to_none).
--cuda-graph (CUDA): the warm-up runs on a side stream, then one whole step is captured with
torch.cuda.graph (PyTorch's whole-network capture: gradients set to None before the capture, so
backward allocates them in the graph's pool) and the timed steps are its replays; the peaks are
then counted from the capture on, as sublet's --cuda-graph counts them.
resnet18/34/50 are torchvision's; resnet20/32/56 are defined here exactly as sublet's
models/resnet.h builds them (3x3 stem with 16 channels, basic blocks of 16/32/64 planes, 1x1
conv + BN projections where the shape changes, global average pool, fc; torchvision's init).
--precision bf16|fp16: the step runs under torch.autocast with that dtype (parameters and optimizer
state stay float32); fp16 adds torch.cuda.amp.GradScaler (PyTorch's defaults). --channels-last:
model and batch in torch.channels_last. fp16 needs CUDA (CPU autocast is bfloat16 only), and a
CUDA graph cannot capture GradScaler's host-side inf check, so --cuda-graph takes fp32 and bf16.
CUDA: cudnn.benchmark on, peaks from torch.cuda.max_memory_allocated/reserved after warm-up.
CPU: PyTorch has no allocator statistics there, so the peaks are null; the thread count is set
with torch.set_num_threads (default: OMP_NUM_THREADS, else every core, like sublet's OpenMP).
GPT models (gpt-nano, gpt-mini, gpt2-small; bench/nanogpt_model.py, as sublet's models/gpt.h):
random token windows of --seq-len (default the model's context) over --vocab ids; step: forward
and next-token cross-entropy under autocast, backward, clip_grad_norm_(1.0), AdamW (lr 6e-4,
betas 0.9/0.95, weight decay 0.1 on 2-D weights; fused=True on CUDA with PyTorch 2.x), zero_grad.
Attention through F.scaled_dot_product_attention where PyTorch has it (2.x), written out on 1.13.
--compile: the model through torch.compile (default mode); the first warm-up step's time, which
includes the compilation, is reported as compile_seconds. Tokens/s and MFU (6N + 12 L C T FLOPs
per token over 989 TFLOP/s, dense bf16 of an H100/H200 SXM) are reported as sublet's bench step
does.
--shape-schedule FILE: step i (warm-up steps first) trains on the i-th shape of a
sublet-shape-schedule file, as `sublet bench step --write-shape-schedule FILE` writes it (token
windows of a length and batch per step for GPT models, or a resolution per step for the image
models), with a fresh batch each step; the report adds the time per token (or image) over the
timed steps.
--alloc-conf-sweep [LIST]: runs the same steps once per allocator setting, each in its own process
(PyTorch reads PYTORCH_CUDA_ALLOC_CONF once, when CUDA starts), and prints the columns of `sublet
bench step --alloc-conf-sweep` from torch.cuda.memory_stats() over the whole run (peaks are not
reset after the warm-up there). LIST: settings separated by ';' ("pytorch" for PyTorch's
defaults); default: pytorch, max_split_size_mb:512, roundup_power2_divisions:16, both,
expandable_segments:True. The reserved-but-unallocated bytes at the reserved peak are not among
PyTorch's statistics: with --snapshot-dir DIR each setting's run records its allocation history
from the start and writes DIR/<setting>.pickle, and `sublet replay --rules pytorch` of that
snapshot gives the column (its "recorded" row). PyTorch keeps no CPU allocator statistics, so on
the CPU the processes run and the memory columns read n/a; --sweep-dry-run prints each setting's
command and environment instead of running it.
--allocator sublet: CUDA tensors come from sublet's caching allocator through sublet_torch.use()
(the sublet_torch package importable; sublet's defaults, or SUBLET_ALLOC_CONF), installed before
the first CUDA allocation; peaks, statistics and snapshots then come from sublet_torch. In a sweep,
the setting "sublet_torch" runs its process that way.
Works with PyTorch 1.13 (Debian 12) and 2.x.
"""
import argparse
import contextlib
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import nanogpt_model

CIFAR_DEPTHS = {"resnet20": 20, "resnet32": 32, "resnet56": 56}
IMAGENET_MODELS = ("resnet18", "resnet34", "resnet50")
GPT_NAMES = tuple(nanogpt_model.CONFIGS)
MODEL_NAMES = ("resnet20", "resnet32", "resnet56") + IMAGENET_MODELS + GPT_NAMES
DENSE_BF16_PEAK_FLOPS = 989e12  # H100/H200 SXM
SHAPE_SCHEDULE_FORMAT, SHAPE_SCHEDULE_VERSION = "sublet-shape-schedule", 1
SUBLET_TORCH_SETTING = "sublet_torch"  # a sweep setting: the process runs with --allocator sublet
DEFAULT_SWEEP = ("pytorch", "max_split_size_mb:512", "roundup_power2_divisions:16",
                 "max_split_size_mb:512,roundup_power2_divisions:16", "expandable_segments:True")


# Where the CUDA memory statistics come from: PyTorch's allocator, or sublet_torch (same function
# names) once --allocator sublet has installed sublet's.
memory_api = torch.cuda


class BasicBlock(nn.Module):
    """torchvision's BasicBlock (same names), repeated here so the CIFAR nets need no torchvision."""

    def __init__(self, in_planes, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or in_planes != planes:  # option B: 1x1 conv + BN projection
            self.downsample = nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(out + identity)


class CifarResNet(nn.Module):
    """He et al. 2016, section 4.2, with projection shortcuts: depth 6n + 2."""

    def __init__(self, depth, in_channels, num_classes):
        super().__init__()
        n = (depth - 2) // 6
        self.conv1 = nn.Conv2d(in_channels, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU()
        layers, in_planes = [], 16
        for i, planes in enumerate((16, 32, 64)):
            blocks = []
            for b in range(n):
                blocks.append(BasicBlock(in_planes, planes, 2 if (i > 0 and b == 0) else 1))
                in_planes = planes
            layers.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3 = layers
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, num_classes)
        for m in self.modules():  # torchvision's ResNet init, as sublet's models
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def create_model(name, in_channels, num_classes, small_input_stem):
    if name in CIFAR_DEPTHS:
        return CifarResNet(CIFAR_DEPTHS[name], in_channels, num_classes)
    import torchvision

    model = getattr(torchvision.models, name)(num_classes=num_classes)
    if small_input_stem:
        model.conv1 = nn.Conv2d(in_channels, 64, 3, 1, 1, bias=False)
        model.maxpool = nn.Identity()
    elif in_channels != 3:
        model.conv1 = nn.Conv2d(in_channels, 64, 7, 2, 3, bias=False)
    if small_input_stem or in_channels != 3:
        nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")
    return model


def parse_input(text):
    # The same text and message as sublet's (cli/image_shape_flag.cpp).
    parts = text.split("x")
    if len(parts) != 3 or not all(p.isascii() and p.isdigit() and 0 < int(p) <= 2147483647 for p in parts):
        raise SystemExit(f'error: --input: expected CxHxW with positive integers, e.g. 3x32x32; found "{text}"')
    return tuple(int(p) for p in parts)


def format_bytes(n):
    if n is None:
        return "n/a"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


def load_shape_schedule(path):
    """A sublet-shape-schedule file (runtime/data/shape_schedule.h): {"kind", "steps": [(batch, seq_len or (C, H, W))],
    "describe"}; SystemExit naming what was expected and found."""
    def fail(what):
        raise SystemExit(f"error: --shape-schedule {path}: {what}")

    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as e:
        fail(e.strerror or str(e))
    except ValueError:
        fail("not valid JSON")
    if not isinstance(doc, dict):
        fail(f"expected a JSON object, found {type(doc).__name__}")
    if doc.get("format") != SHAPE_SCHEDULE_FORMAT:
        fail(f'"format" must be "{SHAPE_SCHEDULE_FORMAT}", found {json.dumps(doc.get("format"))}')
    if doc.get("version") != SHAPE_SCHEDULE_VERSION:
        fail(f'unknown "version" {json.dumps(doc.get("version"))} (this script reads version {SHAPE_SCHEDULE_VERSION})')
    kind = doc.get("kind")
    if kind not in ("tokens", "images"):
        fail(f'"kind" must be "tokens" or "images", found {json.dumps(kind)}')

    def positive(value, where):
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            fail(f"{where} must be a positive integer, found {json.dumps(value)}")
        return value

    raw = doc.get("steps")
    if not isinstance(raw, list) or not raw:
        fail('"steps" must be a non-empty list')
    steps = []
    for i, step in enumerate(raw):
        if not isinstance(step, dict):
            fail(f"step {i}: expected a JSON object, found {json.dumps(step)}")
        batch = positive(step.get("batch"), f'step {i}: "batch"')
        if kind == "tokens":
            steps.append((batch, positive(step.get("seq_len"), f'step {i}: "seq_len"')))
        else:
            dims = step.get("input")
            if not isinstance(dims, list) or len(dims) != 3:
                fail(f'step {i}: "input" must be [C, H, W], found {json.dumps(dims)}')
            steps.append((batch, tuple(positive(d, f'step {i}: "input"') for d in dims)))
    if kind == "tokens":
        describe = (f"seq {doc.get('seq_len_min')}..{doc.get('seq_len_max')} (multiples of {doc.get('multiple')}), "
                    f"about {doc.get('tokens_per_batch')} tokens per step")
    else:
        describe = f"{doc.get('channels')}x{{{','.join(str(r) for r in doc.get('resolutions', []))}}}"
    return {"kind": kind, "steps": steps, "describe": describe}


def check_schedule(args, schedule, language_model, model_name, context=None):
    if schedule is None:
        return
    if (schedule["kind"] == "tokens") != language_model:
        raise SystemExit(f"error: --shape-schedule: {model_name} takes "
                         f"{'token windows' if language_model else 'images'}, the schedule holds "
                         f"{'token windows' if schedule['kind'] == 'tokens' else 'images'}")
    if len(schedule["steps"]) < args.warmup + args.steps:
        raise SystemExit(f"error: --shape-schedule: {len(schedule['steps'])} steps, but the run needs "
                         f"{args.warmup + args.steps} (warm-up + timed steps)")
    if language_model and max(t for _, t in schedule["steps"]) > context:
        raise SystemExit(f"error: --shape-schedule: a length of {max(t for _, t in schedule['steps'])} passes "
                         f"{model_name}'s context of {context} (--block-size sets a longer one)")


def us_per_sample(step_ms, samples):
    return sum(step_ms) * 1000.0 / max(samples, 1)


class Recipe:
    """How a step runs: precision (autocast dtype, GradScaler for fp16) and memory format."""

    AUTOCAST = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}

    def __init__(self, precision="fp32", channels_last=False, device_type="cpu"):
        if precision not in self.AUTOCAST:
            raise SystemExit(f"error: --precision {precision!r}: expected fp32, bf16 or fp16")
        if precision == "fp16" and device_type != "cuda":
            raise SystemExit("error: --precision fp16 needs --device cuda (PyTorch's CPU autocast is bfloat16 only)")
        self.precision = precision
        self.channels_last = channels_last
        self.device_type = device_type
        self.scaler = torch.cuda.amp.GradScaler() if precision == "fp16" else None

    @property
    def memory_format(self):
        return torch.channels_last if self.channels_last else torch.contiguous_format

    def autocast(self, cache_enabled=True):
        dtype = self.AUTOCAST[self.precision]
        if dtype is None:  # fp32: no autocast at all (PyTorch 1.13's CPU autocast refuses float32 even disabled)
            return contextlib.nullcontext()
        return torch.autocast(self.device_type, dtype=dtype, cache_enabled=cache_enabled)


def forward_backward(model, optimizer, images, labels, recipe, cache_enabled=True):
    """Forward under the recipe's autocast, backward, optimizer step (through GradScaler for fp16)."""
    with recipe.autocast(cache_enabled):
        loss = F.cross_entropy(model(images), labels)
    if recipe.scaler is not None:
        recipe.scaler.scale(loss).backward()
        recipe.scaler.step(optimizer)
        recipe.scaler.update()
    else:
        loss.backward()
        optimizer.step()
    return loss


def training_step(model, optimizer, images, labels, recipe=None):
    """One step as sublet's bench step times it; returns the loss (a host float: waits for the GPU)."""
    loss = forward_backward(model, optimizer, images, labels, recipe or Recipe(device_type=images.device.type))
    value = loss.item()
    optimizer.zero_grad(set_to_none=True)
    return value


def run(args, model_name, device, shape):
    torch.manual_seed(args.seed)
    recipe = Recipe(args.precision, args.channels_last, device.type)
    model = create_model(model_name, shape[0], args.classes, args.small_input_stem).to(device)
    model = model.to(memory_format=recipe.memory_format)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    images = torch.randn(args.batch_size, *shape).to(device).contiguous(memory_format=recipe.memory_format)
    labels = torch.randint(0, args.classes, (args.batch_size,)).to(device)
    cuda = device.type == "cuda"

    schedule = args.schedule
    check_schedule(args, schedule, False, model_name)

    def step(i):
        if schedule is None:
            return training_step(model, optimizer, images, labels, recipe)
        batch, dims = schedule["steps"][i]  # a fresh batch of the step's shape, as a loader hands over
        x = torch.randn(batch, *dims).to(device).contiguous(memory_format=recipe.memory_format)
        y = torch.randint(0, args.classes, (batch,)).to(device)
        return training_step(model, optimizer, x, y, recipe)

    def samples(i):
        return schedule["steps"][i][0] if schedule else args.batch_size

    print(f"pytorch step: {model_name} on {device}, {args.warmup} warm-up + {args.steps} timed steps"
          + (" (CUDA graph replays)" if args.cuda_graph else "")
          + (f", inputs {schedule['describe']}" if schedule else ""), file=sys.stderr)
    if schedule is not None:
        images = labels = None
    if args.cuda_graph:
        replay = capture_step(args, model, optimizer, images, labels, recipe)
        step = lambda i: replay()  # noqa: E731
    else:
        for i in range(args.warmup):
            step(i)
    step_ms, cpu_ms = time_steps(args, step, cuda)
    timed = sum(samples(i) for i in range(args.warmup, args.warmup + args.steps))
    return {
        "framework": f"pytorch {torch.__version__}",
        "cuda_graph": bool(args.cuda_graph),
        "precision": args.precision,
        "memory_format": "channels_last" if args.channels_last else "contiguous",
        "model": model_name,
        "device": "cuda:0" if cuda else "cpu",
        "batch_size": args.batch_size,
        "input": "x".join(str(s) for s in shape),
        "classes": args.classes,
        **timing_fields(args, step_ms, cpu_ms, cuda),
        "us_per_image": us_per_sample(step_ms, timed),
        **({"shape_schedule": schedule["describe"], "timed_samples": timed, "input": "varies", "batch_size": "varies"}
           if schedule else {}),
    }


def timing_fields(args, step_ms, cpu_ms, cuda):
    """The result fields every model's run reports: the timed steps and the device's peaks."""
    ms = statistics.median(step_ms)
    return {
        "threads": torch.get_num_threads(),
        "ms_per_step": ms,
        "cpu_ms_per_step": statistics.median(cpu_ms),
        "img_per_s": args.batch_size * 1000.0 / ms,
        "peak_allocated_bytes": memory_api.max_memory_allocated() if cuda else None,
        "peak_reserved_bytes": memory_api.max_memory_reserved() if cuda else None,
        "steps": args.steps,
        "warmup": args.warmup,
        "step_ms": step_ms,
    }


def time_steps(args, step, cuda):
    """The timed steps after the warm-up: wall and process CPU milliseconds of each."""
    if cuda:
        torch.cuda.synchronize()
        if not args.cuda_graph and not args.stats_from_start:  # a graph's peaks count from its capture on
            memory_api.reset_peak_memory_stats()
    step_ms, cpu_ms = [], []
    if cuda and args.profile_range:
        torch.cuda.cudart().cudaProfilerStart()
    for i in range(args.warmup, args.warmup + args.steps):
        start, cpu_start = time.perf_counter(), time.process_time()
        step(i)
        if cuda:
            torch.cuda.synchronize()
        step_ms.append((time.perf_counter() - start) * 1000.0)
        cpu_ms.append((time.process_time() - cpu_start) * 1000.0)
    if cuda and args.profile_range:
        torch.cuda.cudart().cudaProfilerStop()
    return step_ms, cpu_ms


def run_gpt(args, model_name, device):
    torch.manual_seed(args.seed)
    cuda = device.type == "cuda"
    n_layer, n_head, n_embd, block_size = nanogpt_model.CONFIGS[model_name]
    block_size = args.block_size or block_size
    seq_len = args.seq_len or block_size
    schedule = args.schedule
    check_schedule(args, schedule, True, model_name, block_size)
    if seq_len > block_size:
        raise SystemExit(f"error: --seq-len {seq_len} is longer than {model_name}'s context of {block_size}")
    attention = "sdpa" if hasattr(F, "scaled_dot_product_attention") else "manual"
    model = nanogpt_model.GPT(n_layer, n_head, n_embd, block_size, args.vocab, attention)
    nanogpt_model.init_weights(model, n_layer)
    model.to(device).train()
    fused = cuda and int(torch.__version__.split(".")[0]) >= 2
    optimizer = nanogpt_model.adamw(model, 6e-4, 0.1, fused=fused)
    params = list(model.parameters())
    recipe = Recipe(args.precision, False, device.type)
    forward = torch.compile(model) if args.compile else model
    inputs = targets = None
    if schedule is None:
        inputs = torch.randint(0, args.vocab, (args.batch_size, seq_len), device=device)
        targets = torch.randint(0, args.vocab, (args.batch_size, seq_len), device=device)

    def step(i):
        if schedule is not None:  # the step's windows, drawn afresh as a loader's batch would be
            batch, length = schedule["steps"][i]
            x = torch.randint(0, args.vocab, (batch, length), device=device)
            y = torch.randint(0, args.vocab, (batch, length), device=device)
        else:
            x, y = inputs, targets
        with recipe.autocast():
            logits = forward(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.reshape(-1))
        if recipe.scaler is not None:
            recipe.scaler.scale(loss).backward()
            recipe.scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            recipe.scaler.step(optimizer)
            recipe.scaler.update()
        else:
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
        value = loss.item()
        optimizer.zero_grad(set_to_none=True)
        return value

    shapes = f"inputs {schedule['describe']}" if schedule else f"batch {args.batch_size} x {seq_len} tokens"
    print(f"pytorch step: {model_name} on {device}, {shapes}, attention {attention}"
          f"{', torch.compile' if args.compile else ''}, {args.warmup} warm-up + {args.steps} timed steps",
          file=sys.stderr)
    compile_seconds = None
    for i in range(max(args.warmup, 1 if args.compile else 0)):
        start = time.perf_counter()
        step(i)
        if cuda:
            torch.cuda.synchronize()
        if i == 0 and args.compile:
            compile_seconds = time.perf_counter() - start
    step_ms, cpu_ms = time_steps(args, step, cuda)
    ms = statistics.median(step_ms)
    timed_steps = [schedule["steps"][i] if schedule else (args.batch_size, seq_len)
                   for i in range(args.warmup, args.warmup + args.steps)]
    timed = sum(b * t for b, t in timed_steps)
    # Fixed shapes: from the median step; a schedule's steps differ, so all of them count.
    tokens_per_s = 1e6 / us_per_sample(step_ms, timed) if schedule else args.batch_size * seq_len * 1000.0 / ms
    n_params = sum(p.numel() for p in model.parameters()) - model.transformer.wpe.weight.numel()
    # Attention's FLOPs grow with the window: averaged over the timed tokens.
    mean_len = sum(b * t * t for b, t in timed_steps) / timed
    flops_per_token = 6.0 * n_params + 12.0 * n_layer * n_embd * mean_len
    return {
        "framework": f"pytorch {torch.__version__}" + (" compile" if args.compile else ""),
        "cuda_graph": False,
        "precision": args.precision,
        "memory_format": "contiguous",
        "model": model_name,
        "device": "cuda:0" if cuda else "cpu",
        "batch_size": "varies" if schedule else args.batch_size,
        "input": "varies" if schedule else f"seq {seq_len}",
        "classes": args.vocab,
        **timing_fields(args, step_ms, cpu_ms, cuda),
        "seq_len": max(t for _, t in timed_steps),  # the longest under a schedule
        "vocab_size": args.vocab,
        "us_per_token": us_per_sample(step_ms, timed),
        **({"shape_schedule": schedule["describe"], "timed_samples": timed} if schedule else {}),
        "tokens_per_s": tokens_per_s,
        "flops_per_token": flops_per_token,
        "mfu": flops_per_token * tokens_per_s / DENSE_BF16_PEAK_FLOPS if cuda else 0.0,
        "attention": attention,
        "compile_seconds": compile_seconds,
    }


def capture_step(args, model, optimizer, images, labels, recipe):
    """Warm-up on a side stream, then one training step captured as a CUDA graph; returns a
    function that replays it (PyTorch's documented whole-network capture)."""
    def train_step():
        # Autocast's cast cache must be off inside a graph (its cached casts would be freed).
        return forward_backward(model, optimizer, images, labels, recipe, cache_enabled=False)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(max(args.warmup, 1)):  # cudnn.benchmark picks its engines here, not in the capture
            optimizer.zero_grad(set_to_none=True)
            train_step()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    memory_api.reset_peak_memory_stats()
    graph = torch.cuda.CUDAGraph()
    optimizer.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        static_loss = train_step()

    def replay():
        graph.replay()
        return static_loss

    return replay


def print_table(results):
    print(f"{'model':<10} {'device':<7} {'batch':>6} {'input':>10} {'threads':>8} {'ms/step':>11} {'cpu ms/step':>11} "
          f"{'img/s':>10} "
          f"{'peak alloc':>14} {'peak reserved':>14}")
    for r in results:
        print(f"{r['model']:<10} {r['device']:<7} {r['batch_size']:>6} {r['input']:>10} {r['threads']:>8} "
              f"{r['ms_per_step']:>11.1f} {r['cpu_ms_per_step']:>11.1f} {r['img_per_s']:>10.1f} {format_bytes(r['peak_allocated_bytes']):>14} "
              f"{format_bytes(r['peak_reserved_bytes']):>14}")
    print(f"ms/step: median over the timed steps (forward, cross-entropy, backward, SGD step, zero_grad); "
          f"cpu ms/step: process CPU time of a step, all threads; PyTorch {torch.__version__}")
    for r in results:
        if "us_per_image" in r and "shape_schedule" in r:
            print(f"{r['model']}: inputs {r['shape_schedule']}, {r['us_per_image']:.3f} us per image")
        if "tokens_per_s" not in r:
            continue
        mfu = f", MFU {100.0 * r['mfu']:.1f}% of 989 TFLOP/s" if r["mfu"] else ""
        compiled = f", compile {r['compile_seconds']:.1f} s" if r.get("compile_seconds") is not None else ""
        shapes = (f"inputs {r['shape_schedule']}, {r['us_per_token']:.3f} us per token" if "shape_schedule" in r
                  else f"batch {r['batch_size']} x {r['seq_len']} tokens")
        print(f"{r['model']}: {shapes}, {r['tokens_per_s']:.0f} tokens/s{mfu}"
              f"{compiled} (attention {r['attention']})")


SWEEP_CHILD_ENV = "SUBLET_PYTORCH_STEP_SWEEP_ROW"         # set in a sweep's child: where it writes its row
SWEEP_SNAPSHOT_ENV = "SUBLET_PYTORCH_STEP_SWEEP_SNAPSHOT"  # and where its memory snapshot goes


def sweep_settings(text):
    if not text.strip():
        return list(DEFAULT_SWEEP)
    settings = [entry.strip() for entry in text.split(";")]
    if any(not entry for entry in settings):
        raise SystemExit(f"error: --alloc-conf-sweep '{text}': an empty entry; expected settings separated by ';'")
    if "sublet" in settings:
        raise SystemExit("error: --alloc-conf-sweep: 'sublet' names sublet's own defaults, which PyTorch's allocator "
                         "has no setting for; use expandable_segments:True (sublet's CUDA default), or "
                         f"{SUBLET_TORCH_SETTING} (sublet's allocator inside PyTorch) instead")
    return settings


def sweep_row(label, stats, result):
    """The columns of `sublet bench step --alloc-conf-sweep` (bench/step/sweep_report.h) from memory_stats()."""
    sample = "token" if "us_per_token" in result else "image"

    def stat(key):
        return stats.get(key) if stats is not None else None

    peak_allocated, peak_reserved = stat("allocated_bytes.all.peak"), stat("reserved_bytes.all.peak")
    return {"label": label,
            "alloc_conf": "" if label in ("pytorch", SUBLET_TORCH_SETTING) else label,
            "peak_allocated_bytes": peak_allocated,
            "peak_reserved_bytes": peak_reserved,
            "reserved_per_allocated": peak_reserved / peak_allocated if peak_allocated else None,
            "reserved_unallocated_at_peak_bytes": None,  # not among PyTorch's statistics: see --snapshot-dir
            "segments_created": stat("segment.all.allocated"),
            "device_allocations": stat("num_device_alloc"),
            "alloc_retries": stat("num_alloc_retries"),
            "ooms": stat("num_ooms"),
            "us_per_" + sample: result.get("us_per_" + sample),
            "memory_stats": stats,
            "run": result}


def run_sweep(args):
    """One process per setting (PyTorch reads its allocator settings once), each running this script's steps
    with PYTORCH_CUDA_ALLOC_CONF set; prints and writes the rows."""
    settings = sweep_settings(args.alloc_conf_sweep)
    if len(args.model.split(",")) != 1:
        raise SystemExit("error: --alloc-conf-sweep: one --model per sweep")
    if args.snapshot_dir and not os.path.isdir(args.snapshot_dir):
        raise SystemExit(f"error: --snapshot-dir {args.snapshot_dir}: not a folder")
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for n, setting in enumerate(settings):
            env = {k: v for k, v in os.environ.items() if k not in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")}
            if setting not in ("pytorch", SUBLET_TORCH_SETTING):
                env["PYTORCH_CUDA_ALLOC_CONF"] = setting
            env[SWEEP_CHILD_ENV] = os.path.join(scratch, f"row{n}.json")
            if args.snapshot_dir:
                name = "".join(c if c.isalnum() or c in "_-." else "_" for c in setting)
                env[SWEEP_SNAPSHOT_ENV] = os.path.join(args.snapshot_dir, f"{name}.pickle")
            command = [sys.executable, os.path.abspath(__file__)] + [a for a in sys.argv[1:] if a != "--sweep-dry-run"]
            if setting == SUBLET_TORCH_SETTING:
                command += ["--allocator", "sublet"]
            if args.sweep_dry_run:
                print(shlex.join([f"PYTORCH_CUDA_ALLOC_CONF={env.get('PYTORCH_CUDA_ALLOC_CONF', '')}",
                                  f"{SWEEP_CHILD_ENV}={env[SWEEP_CHILD_ENV]}"] + command))
                continue
            print(f"pytorch step: allocator setting {setting}", file=sys.stderr)
            done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL)
            if done.returncode != 0 or not os.path.exists(env[SWEEP_CHILD_ENV]):
                # An OOM ends the child; its row says so without figures.
                rows.append(dict(sweep_row(setting, None, {}), ooms=None, failed=f"exit code {done.returncode}"))
                continue
            with open(env[SWEEP_CHILD_ENV]) as f:
                child = json.load(f)
            rows.append(sweep_row(setting, child["memory_stats"], child["result"]))
    if args.sweep_dry_run:
        return None
    print_sweep_table(rows)
    if args.json:
        report = {"format": "sublet-alloc-conf-sweep", "framework": f"pytorch {torch.__version__}",
                  "model": args.model, "steps": args.steps, "warmup": args.warmup, "precision": args.precision,
                  "shape_schedule": args.shape_schedule, "rows": rows}
        with open(args.json, "w") as out:
            json.dump(report, out, indent=2)
            out.write("\n")
        print(f"wrote {args.json}")
    return None


def print_sweep_table(rows):
    sample = next((k[len("us_per_"):] for r in rows for k in r if k.startswith("us_per_")), "token")
    width = max([7] + [len(r["label"]) for r in rows])

    def cell(value, fmt="{}"):
        return "n/a" if value is None else fmt.format(value)

    print(f"{'setting':<{width}} {'peak alloc':>12} {'peak reserved':>13} {'res/alloc':>9} {'unalloc@peak':>12} "
          f"{'segments':>8} {'device allocs':>13} {'retries':>7} {'OOMs':>4} {'us/' + sample:>10}")
    for r in rows:
        print(f"{r['label']:<{width}} {format_bytes(r['peak_allocated_bytes']):>12} "
              f"{format_bytes(r['peak_reserved_bytes']):>13} {cell(r['reserved_per_allocated'], '{:.3f}'):>9} "
              f"{'n/a':>12} {cell(r['segments_created']):>8} {cell(r['device_allocations']):>13} "
              f"{cell(r['alloc_retries']):>7} {cell(r['ooms']):>4} {cell(r.get('us_per_' + sample), '{:.3f}'):>10}")
    print("columns as sublet bench step --alloc-conf-sweep, from torch.cuda.memory_stats() over the whole run; "
          "unalloc@peak: sublet replay --rules pytorch of the --snapshot-dir snapshot gives it; "
          f"PyTorch {torch.__version__}")


def use_sublet_allocator():
    """sublet's allocator for every CUDA tensor of this process, before the first is made."""
    global memory_api
    if not torch.cuda.is_available():
        raise SystemExit("error: --allocator sublet: this PyTorch has no usable CUDA device (sublet_torch serves CUDA "
                         "tensors)")
    try:
        import sublet_torch
    except ImportError as e:
        raise SystemExit(f"error: --allocator sublet: cannot import sublet_torch ({e}); install it with "
                         "`pip install ./python` or put python/ on PYTHONPATH") from None
    sublet_torch.use()
    memory_api = sublet_torch


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--model", required=True, help="comma-separated: " + ", ".join(MODEL_NAMES))
    parser.add_argument("--input", default="3x32x32", help="CxHxW")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--small-input-stem", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", os.cpu_count() or 1)),
                        help="CPU threads (default: OMP_NUM_THREADS, else every core)")
    parser.add_argument("--profile-range", action="store_true",
                        help="mark the timed steps for `ncu --profile-from-start off` (cudaProfilerStart/Stop)")
    parser.add_argument("--cuda-graph", action="store_true",
                        help="capture the step into a CUDA graph after the warm-up and time its replays (CUDA)")
    parser.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default="fp32",
                        help="autocast dtype of the step (fp16 with GradScaler; CUDA only)")
    parser.add_argument("--channels-last", action="store_true", help="model and batch in torch.channels_last")
    parser.add_argument("--json", help="write the result(s) here: one object, or a list for several models")
    parser.add_argument("--seq-len", type=int, default=0, help="GPT models: tokens per window (0: the context)")
    parser.add_argument("--vocab", type=int, default=50304, help="GPT models: vocabulary size")
    parser.add_argument("--compile", action="store_true", help="GPT models: torch.compile the model (PyTorch 2.x)")
    parser.add_argument("--block-size", type=int, default=0,
                        help="GPT models: the context, positions with embeddings (0: the model's own)")
    parser.add_argument("--shape-schedule", help="read every step's shape from this sublet-shape-schedule file "
                        "(sublet bench step --write-shape-schedule writes one)")
    parser.add_argument("--alloc-conf-sweep", nargs="?", const="", default=None, metavar="LIST",
                        help="run the steps once per PYTORCH_CUDA_ALLOC_CONF setting, a process each; LIST: settings "
                        "separated by ';' (pytorch: PyTorch's defaults); default: " + "; ".join(DEFAULT_SWEEP))
    parser.add_argument("--snapshot-dir", help="with --alloc-conf-sweep: write each setting's memory snapshot here "
                        "(for sublet replay --rules pytorch)")
    parser.add_argument("--allocator", choices=("pytorch", "sublet"), default="pytorch",
                        help="CUDA tensor memory: PyTorch's caching allocator, or sublet's through sublet_torch.use()")
    parser.add_argument("--sweep-dry-run", action="store_true",
                        help="with --alloc-conf-sweep: print each setting's command and environment, run nothing")
    args = parser.parse_args()
    args.schedule = load_shape_schedule(args.shape_schedule) if args.shape_schedule else None
    if args.block_size < 0:
        raise SystemExit("error: --block-size must be non-negative")
    child = os.environ.get(SWEEP_CHILD_ENV)
    # A sweep's child: counters and peaks over the whole run, as sublet's sweep keeps them.
    args.stats_from_start = child is not None
    if args.alloc_conf_sweep is not None and child is None:
        return run_sweep(args)
    if args.alloc_conf_sweep is None and (args.snapshot_dir or args.sweep_dry_run):
        raise SystemExit("error: --snapshot-dir and --sweep-dry-run go with --alloc-conf-sweep")
    if args.allocator == "sublet":
        use_sublet_allocator()
    snapshot = os.environ.get(SWEEP_SNAPSHOT_ENV)
    if snapshot and args.allocator == "sublet":
        memory_api.record_memory_history(max_entries=4_000_000, stacks=None)
    elif snapshot and torch.cuda.is_available():
        # Before anything is allocated: sublet replay rebuilds the run from an empty allocator.
        try:
            torch.cuda.memory._record_memory_history(max_entries=4_000_000, context=None, stacks="python")
        except TypeError:
            torch.cuda.memory._record_memory_history(max_entries=4_000_000)

    models = args.model.split(",")
    unknown = [m for m in models if m not in MODEL_NAMES]
    if unknown:
        raise SystemExit(f"error: unknown model {unknown[0]!r}: known models are {', '.join(MODEL_NAMES)}")
    if min(args.batch_size, args.classes, args.steps) <= 0 or args.warmup < 0:
        raise SystemExit("error: --batch-size, --classes and --steps must be positive, --warmup non-negative")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("error: --device cuda: this PyTorch has no usable CUDA device")
    device = torch.device("cuda:0" if args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
                          else "cpu")
    if args.cuda_graph and device.type != "cuda":
        raise SystemExit("error: --cuda-graph needs --device cuda (CUDA graphs are a GPU feature)")
    if args.cuda_graph and args.precision == "fp16":
        raise SystemExit("error: --cuda-graph with --precision fp16: GradScaler checks for inf on the host, which a "
                         "CUDA graph cannot capture; use bf16 or drop --cuda-graph")
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    else:
        torch.set_num_threads(args.threads)
    shape = parse_input(args.input)

    if any(m in GPT_NAMES for m in models) and (args.cuda_graph or args.channels_last):
        raise SystemExit("error: GPT models run eager here, without --cuda-graph (its capture covers the image models' "
                         "step) and without --channels-last")
    if child is not None and len(models) != 1:
        raise SystemExit("error: --alloc-conf-sweep: one --model per sweep (each setting's process reports its "
                         "allocator's statistics, which several models would mix)")
    try:
        results = [run_gpt(args, m, device) if m in GPT_NAMES else run(args, m, device, shape) for m in models]
    except RuntimeError as e:  # torch.cuda.OutOfMemoryError is one; the sweep's row keeps the statistics
        if child is None or "out of memory" not in str(e):
            raise
        print(f"pytorch step: {e}", file=sys.stderr)
        results = [{"out_of_memory": True}]
    if child is not None:
        cuda = device.type == "cuda"
        if cuda:
            torch.cuda.synchronize()
        if snapshot and cuda:
            if args.allocator == "sublet":
                memory_api.dump_snapshot(snapshot)
            else:
                torch.cuda.memory._dump_snapshot(snapshot)
        with open(child, "w") as out:
            json.dump({"memory_stats": dict(memory_api.memory_stats()) if cuda else None, "result": results[0]}, out)
        return None
    print_table(results)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results[0] if len(results) == 1 else results, out, indent=2)
            out.write("\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
