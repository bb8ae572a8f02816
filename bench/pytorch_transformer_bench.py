#!/usr/bin/python3
"""The PyTorch peer of `sf-trainer bench`: torch.nn.Transformer training on synthetic batches
(and, for the transformer_lm presets, a decoder-only causal language model of
nn.TransformerEncoderLayer under a causal mask: fairseq's transformer_lm without its names).

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
    # Decoder-only language models (fairseq's transformer_lm): enc=0, causal layers only.
    "transformer_lm_small": dict(d_model=256, heads=4, ffn=1024, enc=0, dec=3, tied=True),
    "transformer_lm": dict(d_model=512, heads=8, ffn=2048, enc=0, dec=6, tied=False),
}
# fairseq's fconv presets (ConvS2S): embedding width, fc2 width, channels and kernel of every
# convolution, layers per side, tied fc3.
FCONV_PRESETS = {
    "fconv_small": dict(embed=256, out_embed=256, channels=256, kernel=3, enc=4, dec=3, tied=True),
    "fconv_iwslt_de_en": dict(embed=256, out_embed=256, channels=256, kernel=3, enc=4, dec=3, tied=False),
    "fconv": dict(embed=512, out_embed=256, channels=512, kernel=3, enc=20, dec=20, tied=False),
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


class LanguageModel(nn.Module):
    """A decoder without encoder attention: nn.TransformerEncoderLayer (self-attention and
    feed-forward) under a causal mask, over scaled embeddings + sinusoidal positions; the
    output projection tied to the embedding or its own. The batch's source is not read."""

    def __init__(self, vocab, d_model, heads, ffn, layers, dropout, tied):
        super().__init__()
        self.d_model = d_model
        self.embed_tokens = nn.Embedding(vocab, d_model, padding_idx=1)
        nn.init.normal_(self.embed_tokens.weight, 0, d_model ** -0.5)
        self.register_buffer("pe", sinusoidal(1024, d_model))
        layer = nn.TransformerEncoderLayer(d_model, heads, ffn, dropout, batch_first=True)
        self.layers = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.dropout = nn.Dropout(dropout)
        self.output_projection = None if tied else nn.Linear(d_model, vocab, bias=False)

    def forward(self, src, tgt_in, tgt_mask):
        pos = self.pe[2:2 + tgt_in.shape[1]]
        x = self.dropout(math.sqrt(self.d_model) * self.embed_tokens(tgt_in) + pos)
        y = self.layers(x, mask=tgt_mask)
        if self.output_projection is None:
            return F.linear(y, self.embed_tokens.weight)
        return self.output_projection(y)


def wn_linear(i, o):
    return nn.utils.weight_norm(nn.Linear(i, o))


class FConv(nn.Module):
    """fairseq's fconv written with nn modules: weight-normalised Linear and Conv1d (the
    decoder's causal: padding k-1, the last k-1 outputs dropped), GLU, residuals scaled by
    sqrt(1/2), attention in every decoder layer scaled by sqrt(source length), learned
    positions. The synthetic batches have no padding, so nothing is masked."""

    def __init__(self, vocab, embed, out_embed, channels, kernel, enc, dec, dropout, tied):
        super().__init__()
        self.k = kernel
        self.drop = nn.Dropout(dropout)
        self.enc_tok, self.enc_pos = nn.Embedding(vocab, embed), nn.Embedding(1026, embed)
        self.dec_tok, self.dec_pos = nn.Embedding(vocab, embed), nn.Embedding(1026, embed)
        for e in (self.enc_tok, self.enc_pos, self.dec_tok, self.dec_pos):
            nn.init.normal_(e.weight, 0, 0.1)
        conv = lambda pad: nn.utils.weight_norm(nn.Conv1d(channels, 2 * channels, kernel, padding=pad))
        self.enc_fc1, self.enc_fc2 = wn_linear(embed, channels), wn_linear(channels, embed)
        self.enc_convs = nn.ModuleList([conv(kernel // 2) for _ in range(enc)])
        self.dec_fc1 = wn_linear(embed, channels)
        self.dec_convs = nn.ModuleList([conv(kernel - 1) for _ in range(dec)])
        self.att_in = nn.ModuleList([wn_linear(channels, embed) for _ in range(dec)])
        self.att_out = nn.ModuleList([wn_linear(embed, channels) for _ in range(dec)])
        self.dec_fc2 = wn_linear(channels, out_embed)
        self.fc3 = None if tied else wn_linear(out_embed, vocab)
        self.fc3_bias = nn.Parameter(torch.zeros(vocab)) if tied else None

    def forward(self, src, tgt_in, unused_mask):
        r = math.sqrt(0.5)
        pos = lambda t: torch.arange(2, 2 + t.shape[1], device=t.device).unsqueeze(0)
        e = self.drop(self.enc_tok(src) + self.enc_pos(pos(src)))
        x = self.enc_fc1(e).transpose(1, 2)  # [B, C, S]
        for conv in self.enc_convs:
            x = (F.glu(conv(self.drop(x)), dim=1) + x) * r
        a = self.enc_fc2(x.transpose(1, 2))
        b = (a + e) * r
        s = math.sqrt(src.shape[1])
        t = self.drop(self.dec_tok(tgt_in) + self.dec_pos(pos(tgt_in)))
        y = self.dec_fc1(t).transpose(1, 2)  # [B, C, T]
        T = tgt_in.shape[1]
        for conv, att_in, att_out in zip(self.dec_convs, self.att_in, self.att_out):
            g = F.glu(conv(self.drop(y))[:, :, :T], dim=1).transpose(1, 2)
            q = (att_in(g) + t) * r
            c = torch.bmm(F.softmax(torch.bmm(q, a.transpose(1, 2)), dim=2), b) * s
            g = (att_out(c) + g) * r
            y = (g.transpose(1, 2) + y) * r
        h = self.drop(self.dec_fc2(y.transpose(1, 2)))
        return self.fc3(h) if self.fc3 is not None else F.linear(h, self.dec_tok.weight, self.fc3_bias)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="transformer_tiny", choices=sorted(PRESETS) + sorted(FCONV_PRESETS))
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
    p = PRESETS.get(a.arch)
    if p is None:
        f = FCONV_PRESETS[a.arch]
        model = FConv(a.vocab, f["embed"], f["out_embed"], f["channels"], f["kernel"], f["enc"], f["dec"],
                      0.1, f["tied"]).to(dev)
    elif p["enc"] == 0:
        model = LanguageModel(a.vocab, p["d_model"], p["heads"], p["ffn"], p["dec"], 0.1,
                              p["tied"]).to(dev)
    else:
        model = Seq2Seq(a.vocab, p["d_model"], p["heads"], p["ffn"], p["enc"], p["dec"],
                        0.1).to(dev)
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

    ns, nt, V = a.batch * a.src_len, a.batch * a.tgt_len, a.vocab
    if p is None:  # fconv: projections, convolutions, attention, output
        E, O, C, k = f["embed"], f["out_embed"], f["channels"], f["kernel"]
        fwd_flops = (ns * (2 * E * C + f["enc"] * k * C * 2 * C) +
                     nt * (2 * E * C + f["dec"] * (k * C * 2 * C + 2 * C * E + 2 * a.src_len * E) + C * O + O * V))
    else:
        C, Fd = p["d_model"], p["ffn"]
        cross = p["enc"] > 0  # a language model has no encoder attention
        fwd_flops = (p["enc"] * ns * (4 * C * C + 2 * C * Fd + 2 * a.src_len * C) +
                     p["dec"] * (nt * (4 * C * C + 2 * C * Fd + 2 * a.tgt_len * C) +
                                 (nt * (2 * C * C + 2 * a.src_len * C) + ns * 2 * C * C if cross else 0)) +
                     nt * C * V)
    flops = 6 * fwd_flops
    step = statistics.median(total)
    rep = {
        "impl": "pytorch %s %s%s" % (torch.__version__,
                                     "fairseq-style fconv" if p is None else "nn.Transformer",
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
