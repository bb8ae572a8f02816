#!/usr/bin/python3
"""PyTorch's half of bench/lstm_vs_pytorch.sh (the engine's is bench/lstm_bench.cc): a training
step of the LSTM family written with torch.nn, timed.

Usage: pytorch_lstm_bench.py layer [--input 256] [--hidden 256] [common options]
         torch.nn.LSTM's forward and backward over a packed batch;
       pytorch_lstm_bench.py model [--vocab 8000] [--dim 256] [--layers 1] [--bidirectional]
                                   [--enc-embed N] [--enc-hidden N] [--dec-embed N] [--dec-hidden N]
                                   [--out-embed N] [--tied] [common options]
         fairseq's lstm model (LSTMModel: LSTM encoder over a packed source, LSTMCell decoder
         with input feeding and dot-product attention, additional_fc when the decoder's hidden
         size differs from out-embed, fc_out or the tied decoder embedding) and its
         label-smoothed loss, written as fairseq writes them; dropout 0.1, label smoothing 0.1.
         Every size defaults to --dim (lstm_small: --enc-embed 256 --enc-hidden 256
         --bidirectional --dec-embed 256 --dec-hidden 512 --out-embed 256 --tied).
       common: [--batch 64] [--min-len 10] [--max-len 30] [--precision fp32|bf16] [--steps 10]
               [--warmup 2] [--seed 1] [--threads 2]

The same sizes and lengths as lstm_bench (min + (i * 7919 + seed) % span for sequences and
sources, min + (i * 104729 + seed) % span for targets, right-padded to max-len). bf16 runs under
torch.autocast("cpu", dtype=torch.bfloat16). Prints `tokens_per_s=<N> step_ms=<median>
tokens=<per step>` (target tokens for the model).
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, EOS = 1, 2


class LstmModel(nn.Module):
    """fairseq's LSTMModel with its sizes: enc_embed / enc_hidden (per direction) / dec_embed /
    dec_hidden / out_embed; additional_fc when dec_hidden != out_embed; the decoder's embedding as
    the output projection when tied."""
    def __init__(self, vocab, enc_embed, enc_hidden, layers, bidirectional, dec_embed, dec_hidden, out_embed,
                 tied, dropout=0.1):
        super().__init__()
        self.dropout = dropout
        self.layers = layers
        self.enc_embed = nn.Embedding(vocab, enc_embed, padding_idx=PAD)
        self.enc_lstm = nn.LSTM(enc_embed, enc_hidden, num_layers=layers, bidirectional=bidirectional,
                                dropout=dropout if layers > 1 else 0.0)
        units = enc_hidden * (2 if bidirectional else 1)
        self.hidden_proj = nn.Linear(units, dec_hidden) if units != dec_hidden else None
        self.cell_proj = nn.Linear(units, dec_hidden) if units != dec_hidden else None
        self.dec_embed = nn.Embedding(vocab, dec_embed, padding_idx=PAD)
        self.cells = nn.ModuleList([nn.LSTMCell(dec_embed + dec_hidden if i == 0 else dec_hidden, dec_hidden)
                                    for i in range(layers)])
        self.input_proj = nn.Linear(dec_hidden, units, bias=False)
        self.output_proj = nn.Linear(units + dec_hidden, dec_hidden, bias=False)
        self.additional_fc = nn.Linear(dec_hidden, out_embed) if dec_hidden != out_embed else None
        self.fc_out = None if tied else nn.Linear(out_embed, vocab)
        self.bidirectional = bidirectional

    def forward(self, src, lengths, tgt_in):
        bsz = src.shape[0]
        x = F.dropout(self.enc_embed(src), self.dropout, self.training).transpose(0, 1)
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, enforce_sorted=False)
        outs, (fh, fc) = self.enc_lstm(packed)
        enc, _ = nn.utils.rnn.pad_packed_sequence(outs, padding_value=PAD * 1.0)
        enc = F.dropout(enc, self.dropout, self.training)
        dirs = 2 if self.bidirectional else 1
        fh = fh.view(self.layers, dirs, bsz, -1).transpose(1, 2).reshape(self.layers, bsz, -1)
        fc = fc.view(self.layers, dirs, bsz, -1).transpose(1, 2).reshape(self.layers, bsz, -1)
        prev_h = [self.hidden_proj(fh[i]) if self.hidden_proj else fh[i] for i in range(self.layers)]
        prev_c = [self.cell_proj(fc[i]) if self.cell_proj else fc[i] for i in range(self.layers)]
        padding = src.eq(PAD).t()
        y = F.dropout(self.dec_embed(tgt_in), self.dropout, self.training).transpose(0, 1)
        feed = y.new_zeros(bsz, prev_h[0].shape[1])
        outs = []
        for j in range(y.shape[0]):
            inp = torch.cat((y[j], feed), dim=1)
            for i, cell in enumerate(self.cells):
                h, c = cell(inp, (prev_h[i], prev_c[i]))
                inp = F.dropout(h, self.dropout, self.training)
                prev_h[i], prev_c[i] = h, c
            a = self.input_proj(h)
            scores = (enc * a.unsqueeze(0)).sum(dim=2).float().masked_fill(padding, float("-inf"))
            probs = F.softmax(scores, dim=0).type_as(enc)
            ctx = (probs.unsqueeze(2) * enc).sum(dim=0)
            out = F.dropout(torch.tanh(self.output_proj(torch.cat((ctx, h), dim=1))), self.dropout, self.training)
            feed = out
            outs.append(out)
        x = torch.stack(outs)
        if self.additional_fc is not None:
            x = F.dropout(self.additional_fc(x), self.dropout, self.training)
        return self.fc_out(x) if self.fc_out is not None else F.linear(x, self.dec_embed.weight)  # T x B x V


def lengths_of(a, prime):
    span = a.max_len - a.min_len + 1
    return [a.min_len + (i * prime + a.seed) % span for i in range(a.batch)]


def layer_step(a):
    """One nn.LSTM layer over the packed batch: returns (step function, tokens)."""
    lengths = sorted(lengths_of(a, 7919), reverse=True)
    lstm = torch.nn.LSTM(a.input, a.hidden)
    x = torch.rand(lengths[0], a.batch, a.input) * 0.2 - 0.1
    packed = nn.utils.rnn.pack_padded_sequence(x, torch.tensor(lengths), enforce_sorted=True)
    tokens = int(packed.data.shape[0])
    dy = torch.rand(tokens, a.hidden) * 0.2 - 0.1

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            y, _ = lstm(packed)
            loss = (y.data.float() * dy).sum()
        loss.backward()
    return step, tokens


def model_step(a):
    """fairseq's lstm model's training step: returns (step function, target tokens)."""
    src = torch.full((a.batch, a.max_len), PAD, dtype=torch.long)
    tin = torch.full((a.batch, a.max_len), PAD, dtype=torch.long)
    tout = torch.full((a.batch, a.max_len), PAD, dtype=torch.long)
    src_lengths, tgt_lengths = lengths_of(a, 7919), lengths_of(a, 104729)
    for i, (ls, lt) in enumerate(zip(src_lengths, tgt_lengths)):
        src[i, :ls - 1] = torch.randint(4, a.vocab, (ls - 1,))
        src[i, ls - 1] = EOS
        words = torch.randint(4, a.vocab, (lt - 1,))
        tin[i, 0] = EOS
        tin[i, 1:lt] = words
        tout[i, :lt - 1] = words
        tout[i, lt - 1] = EOS
    lengths = torch.tensor(src_lengths)
    size = lambda v: v if v > 0 else a.dim  # noqa: E731
    model = LstmModel(a.vocab, size(a.enc_embed), size(a.enc_hidden), a.layers, a.bidirectional, size(a.dec_embed),
                      size(a.dec_hidden), size(a.out_embed), a.tied)
    model.train()
    eps, target = 0.1, tout.t().reshape(-1)

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            logits = model(src, lengths, tin)
        lprobs = F.log_softmax(logits.float(), dim=-1).view(-1, a.vocab)
        nll = -lprobs.gather(1, target.unsqueeze(1)).squeeze(1)
        smooth = -lprobs.sum(dim=-1)
        eps_i = eps / (a.vocab - 1)
        loss = ((1 - eps - eps_i) * nll + eps_i * smooth)[target.ne(PAD)].sum()
        model.zero_grad(set_to_none=True)
        loss.backward()
    return step, sum(tgt_lengths)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=("layer", "model"))
    for name, default in (("batch", 64), ("min-len", 10), ("max-len", 30), ("input", 256), ("hidden", 256),
                          ("vocab", 8000), ("dim", 256), ("layers", 1), ("steps", 10), ("warmup", 2), ("seed", 1),
                          ("threads", 2), ("enc-embed", 0), ("enc-hidden", 0), ("dec-embed", 0), ("dec-hidden", 0),
                          ("out-embed", 0)):
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--bidirectional", action="store_true")
    p.add_argument("--tied", action="store_true", help="the decoder's embedding is the output projection")
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    step, tokens = (layer_step if a.what == "layer" else model_step)(a)
    times = []
    for i in range(a.warmup + a.steps):
        start = time.perf_counter()
        step()
        if i >= a.warmup:
            times.append((time.perf_counter() - start) * 1000)
    times.sort()
    median = times[len(times) // 2]
    print(f"tokens_per_s={tokens / (median / 1000):.0f} step_ms={median:.3f} tokens={tokens}")


if __name__ == "__main__":
    main()
