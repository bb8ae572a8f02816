#!/usr/bin/python3
"""The PyTorch peer of `sf-trainer bench`: torch.nn.Transformer training on synthetic batches.

Same model sizes as Steadfast's presets (transformer_tiny: 256/4 heads/1024/3+3,
transformer_base: 512/8/2048/6+6, transformer_big: 1024/16/4096/6+6), scaled token embeddings + sinusoidal positions, decoder
output projection tied to the target embedding, label-smoothed cross-entropy (0.1, summed over
tokens), AdamW (betas 0.9/0.98, weight decay 1e-4), dropout 0.1 (nn.Transformer's default,
which also applies it to the attention probabilities). fp32, or bf16 through
torch.autocast(device, dtype=torch.bfloat16). torch.set_num_threads(--threads).

--device cuda trains on the GPU (every step ends with torch.cuda.synchronize(); the memory
reported is torch.cuda.max_memory_allocated, the caching allocator's peak); --compile wraps the
model in torch.compile (reported as compile_error when it fails).

Prints target tokens/s, the forward/backward/optimizer split (medians over the timed steps),
peak RSS and the model FLOP rate; `key: value` lines, or one JSON object with --json.
Run with Debian's /usr/bin/python3 (python3-torch). Set ATEN_CPU_CAPABILITY=avx512 for the
stronger AVX-512 kernels (bench/trainer_vs_pytorch.sh does).
"""
import argparse
import json
import math
import os
import resource
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {
    "transformer_tiny": dict(d_model=256, heads=4, ffn=1024, enc=3, dec=3),
    "transformer_base": dict(d_model=512, heads=8, ffn=2048, enc=6, dec=6),
    "transformer_big": dict(d_model=1024, heads=16, ffn=4096, enc=6, dec=6),
}


def sinusoidal(num, dim):
    half = dim // 2
    f = math.log(10000) / (half - 1)
    freq = torch.exp(torch.arange(half, dtype=torch.float32) * -f)
    ang = torch.arange(num, dtype=torch.float32).unsqueeze(1) * freq.unsqueeze(0)
    return torch.cat([torch.sin(ang), torch.cos(ang)], dim=1)


class Seq2Seq(nn.Module):
    def __init__(self, vocab, d_model, heads, ffn, enc, dec, dropout):
        super().__init__()
        self.d_model = d_model
        self.src_embed = nn.Embedding(vocab, d_model, padding_idx=1)
        self.tgt_embed = nn.Embedding(vocab, d_model, padding_idx=1)
        nn.init.normal_(self.src_embed.weight, 0, d_model ** -0.5)
        nn.init.normal_(self.tgt_embed.weight, 0, d_model ** -0.5)
        self.register_buffer("pe", sinusoidal(1024, d_model))
        self.transformer = nn.Transformer(d_model, heads, enc, dec, ffn, dropout, batch_first=True)
        self.dropout = nn.Dropout(dropout)

    def embed(self, table, tokens):
        pos = self.pe[2:2 + tokens.shape[1]]
        return self.dropout(math.sqrt(self.d_model) * table(tokens) + pos)

    def forward(self, src, tgt_in, tgt_mask):
        y = self.transformer(self.embed(self.src_embed, src), self.embed(self.tgt_embed, tgt_in),
                             tgt_mask=tgt_mask)
        return F.linear(y, self.tgt_embed.weight)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="transformer_tiny", choices=sorted(PRESETS))
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--src-len", type=int, default=32)
    ap.add_argument("--tgt-len", type=int, default=32)
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    dev = torch.device(a.device)
    cuda = a.device == "cuda"
    p = PRESETS[a.arch]
    model = Seq2Seq(a.vocab, p["d_model"], p["heads"], p["ffn"], p["enc"], p["dec"], 0.1).to(dev)
    model.train()
    # fused=True is PyTorch's fastest AdamW on a GPU (one multi-tensor kernel), our peer's best.
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4, betas=(0.9, 0.98), weight_decay=1e-4,
                            **({"fused": True} if cuda else {}))
    mask = nn.Transformer.generate_square_subsequent_mask(a.tgt_len).to(dev)
    g = torch.Generator().manual_seed(7)
    compile_error = None
    run_model = model
    if a.compile:
        try:
            run_model = torch.compile(model)
        except Exception as e:  # noqa: BLE001 - report, and fall back to eager
            compile_error = repr(e)[:200]

    def forward(src, tin):
        # torch.compile fails at the first call more often than at torch.compile() itself.
        nonlocal run_model, compile_error
        try:
            return run_model(src, tin, mask)
        except Exception as e:  # noqa: BLE001
            if run_model is model:
                raise
            compile_error = repr(e)[:200]
            run_model = model
            return model(src, tin, mask)

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def batch():
        src = torch.randint(4, a.vocab, (a.batch, a.src_len), generator=g)
        tout = torch.randint(4, a.vocab, (a.batch, a.tgt_len), generator=g)
        tin = torch.cat([torch.full((a.batch, 1), 2), tout[:, :-1]], dim=1)
        return (src.to(dev, non_blocking=True), tin.to(dev, non_blocking=True),
                tout.to(dev, non_blocking=True))

    fwd, bwd, optim, total = [], [], [], []
    loss_value = 0.0
    for i in range(a.warmup + a.steps):
        if i == a.warmup and cuda:
            torch.cuda.reset_peak_memory_stats()
        src, tin, tout = batch()
        sync()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        if a.precision == "bf16":
            with torch.autocast(a.device, dtype=torch.bfloat16):
                logits = forward(src, tin)
                loss = F.cross_entropy(logits.float().reshape(-1, a.vocab), tout.reshape(-1),
                                       label_smoothing=0.1, reduction="sum", ignore_index=1)
        else:
            logits = forward(src, tin)
            loss = F.cross_entropy(logits.reshape(-1, a.vocab), tout.reshape(-1),
                                   label_smoothing=0.1, reduction="sum", ignore_index=1)
        sync()
        t1 = time.perf_counter()
        (loss / tout.numel()).backward()
        sync()
        t2 = time.perf_counter()
        opt.step()
        sync()
        t3 = time.perf_counter()
        if i >= a.warmup:
            fwd.append(t1 - t0)
            bwd.append(t2 - t1)
            optim.append(t3 - t2)
            total.append(t3 - t0)
            loss_value = float(loss) / tout.numel()

    C, Fd, V = p["d_model"], p["ffn"], a.vocab
    ns, nt = a.batch * a.src_len, a.batch * a.tgt_len
    fwd_flops = (p["enc"] * ns * (4 * C * C + 2 * C * Fd + 2 * a.src_len * C) +
                 p["dec"] * (nt * (4 * C * C + 2 * C * Fd + 2 * a.tgt_len * C) +
                             nt * (2 * C * C + 2 * a.src_len * C) + ns * 2 * C * C) +
                 nt * C * V)
    flops = 6 * fwd_flops
    step = statistics.median(total)
    rep = {
        "impl": "pytorch %s nn.Transformer%s" % (torch.__version__,
                                                   " (torch.compile)" if a.compile and not compile_error else ""),
        "device": torch.cuda.get_device_name(dev) if cuda else "cpu",
        "aten_cpu_capability": os.environ.get("ATEN_CPU_CAPABILITY", "default"),
        "arch": a.arch, "precision": a.precision, "threads": torch.get_num_threads(),
        "batch": a.batch, "src_len": a.src_len, "tgt_len": a.tgt_len, "vocab": a.vocab,
        "parameters": sum(x.numel() for x in model.parameters()),
        "steps": a.steps,
        "step_s": round(step, 4),
        "tokens_per_s": round(nt / step, 1),
        "forward_s": round(statistics.median(fwd), 4),
        "backward_s": round(statistics.median(bwd), 4),
        "optimizer_s": round(statistics.median(optim), 4),
        "model_gflop_per_step": round(flops / 1e9, 2),
        "achieved_gflops": round(flops / step / 1e9, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
        "last_loss_per_token": round(loss_value, 4),
    }
    if cuda:
        rep["device_peak_mb"] = round(torch.cuda.max_memory_allocated(dev) / 2**20, 1)
    if compile_error:
        rep["compile_error"] = compile_error
    if a.json:
        print(json.dumps(rep))
    else:
        for k, v in rep.items():
            print("%s: %s" % (k, v))


if __name__ == "__main__":
    main()
