#!/usr/bin/env python3
"""The PyTorch side of sublet's GPT parity check (test_gpt_torch_parity).

Builds nanoGPT's model (model.py, GPT-2's design; bench/nanogpt_model.py) in PyTorch with the
attention written out (PyTorch 1.13 has no scaled_dot_product_attention; --attention sdpa uses it
on 2.x), loads
sublet's initial weights from a safetensors file with load_state_dict(strict=True), trains it
with nanoGPT's AdamW setup (weight decay on 2-D tensors only, betas 0.9/0.95) and gradient
clipping on the given batches in float32 with TF32 off, and writes the loss of every step as JSON.

  python3 gpt_torch_parity.py --weights init.safetensors --batches batches.safetensors \
      --out torch_losses.json [--lr 1e-3 --warmup-steps 10 --weight-decay 0.1 --grad-clip 1.0 --device cpu]

Needs only torch (the safetensors files are read here; Debian has no safetensors package).
"""
import argparse
import json
import math
import os
import sys

import torch

# The model is bench/nanogpt_model.py, shared with bench/pytorch_step.py.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from nanogpt_model import GPT, adamw  # noqa: E402

_DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "I32": torch.int32}


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    header_len = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + header_len])
    base = 8 + header_len
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        raw = bytearray(data[base + begin:base + end])
        dtype = _DTYPES[entry["dtype"]]
        values = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
        tensors[name] = values.reshape(entry["shape"]).clone()
    return tensors, metadata


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", required=True)
    parser.add_argument("--batches", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--grad-clip", type=float, default=1.0)
    parser.add_argument("--warmup-steps", type=int, default=0,
                        help="> 0: nanoGPT's schedule, lr (it + 1) / (warmup + 1), then cosine to lr / 10 at the last step")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--attention", choices=["manual", "sdpa"], default="manual")
    args = parser.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    weights, meta = load_safetensors(args.weights)
    sizes = {k: int(meta[k]) for k in ("n_layer", "n_head", "n_embd", "block_size", "vocab_size")}
    model = GPT(**sizes, attention=args.attention)
    model.load_state_dict(weights, strict=True)
    model.to(args.device)
    batches, _ = load_safetensors(args.batches)
    inputs, targets = batches["inputs"].to(args.device), batches["targets"].to(args.device)

    optimizer = adamw(model, args.lr, args.weight_decay)
    steps = inputs.size(0)

    def lr_at(it):  # nanoGPT's get_lr with lr_decay_iters = steps, min_lr = lr / 10
        if args.warmup_steps <= 0:
            return args.lr
        if it < args.warmup_steps:
            return args.lr * (it + 1) / (args.warmup_steps + 1)
        ratio = (it - args.warmup_steps) / max(1, steps - args.warmup_steps)
        return args.lr / 10 + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (args.lr - args.lr / 10)

    losses = []
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step)
        logits = model(inputs[step])
        loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), targets[step].view(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if args.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        optimizer.step()
        losses.append(loss.item())
    with open(args.out, "w") as f:
        json.dump({"losses": losses, "torch": torch.__version__, "attention": args.attention,
                   "device": args.device}, f)


if __name__ == "__main__":
    main()
