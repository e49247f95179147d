"""nanoGPT's model (karpathy/nanoGPT model.py, GPT-2's design) in PyTorch, as sublet builds it
(models/gpt.h): learned position embeddings, pre-norm blocks, biases, GPT-2's tanh GELU, the head
tied to the token embedding. The state_dict names are nanoGPT's for its flash-attention model
(no attn.bias buffer), so sublet's weights file loads with load_state_dict(strict=True).

attention="manual" writes the attention out (PyTorch 1.13 has no scaled_dot_product_attention);
"sdpa" calls F.scaled_dot_product_attention (PyTorch 2.x, fused kernels on the GPU).
Used by bench/pytorch_step.py and tests/models/gpt_torch_parity.py.
"""
import math

import torch
import torch.nn as nn
from torch.nn import functional as F

CONFIGS = {  # name: (n_layer, n_head, n_embd, block_size), as models/gpt.cpp
    "gpt-nano": (3, 3, 48, 64),
    "gpt-mini": (6, 6, 384, 256),
    "gpt2-small": (12, 12, 768, 1024),
}


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, attention):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head, self.n_embd, self.attention = n_head, n_embd, attention

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if self.attention == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            # Made here, not a registered buffer: the flash-attention model's state_dict has no attn.bias.
            mask = torch.tril(torch.ones(T, T, device=x.device, dtype=torch.bool))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(~mask, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.gelu = nn.GELU(approximate="tanh")  # GPT-2's (nanoGPT's model.py uses the exact form)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, attention):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, attention)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, n_layer, n_head, n_embd, block_size, vocab_size, attention="manual"):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd),
            wpe=nn.Embedding(block_size, n_embd),
            h=nn.ModuleList([Block(n_embd, n_head, attention) for _ in range(n_layer)]),
            ln_f=nn.LayerNorm(n_embd),
        ))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying, as nanoGPT

    def forward(self, idx):
        """idx [B, T] -> logits [B, T, vocab_size]."""
        T = idx.size(1)
        pos = torch.arange(0, T, dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


def init_weights(model, n_layer):
    """nanoGPT's init: normal(0, 0.02), residual projections 0.02 / sqrt(2 n_layer), biases zero."""
    for name, p in model.named_parameters():
        if name.endswith("c_proj.weight"):
            nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * n_layer))
        elif p.dim() >= 2:
            nn.init.normal_(p, 0.0, 0.02)
        elif "ln_" in name and name.endswith("weight"):
            nn.init.ones_(p)
        else:
            nn.init.zeros_(p)


def adamw(model, lr, weight_decay, fused=False):
    """nanoGPT's configure_optimizers: decay on 2-D tensors only, betas (0.9, 0.95)."""
    params = [p for _, p in model.named_parameters()]  # the tied table once
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    if fused:
        return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), fused=True)
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))
