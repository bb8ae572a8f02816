#!/usr/bin/python3
"""The speech recogniser of trainer/models/speech_ctc.h written independently in PyTorch, for
engine_speech_ctc_test.

Usage: speech_ctc_reference.py CASE.safetensors [--tolerance 1e-4]

The case holds every weight under the engine's names, the batch ("batch.features" [B, T, M],
"batch.frames" [B], "batch.targets" [B, L], "batch.target_lengths" [B]) and the engine's results
("ours.logits" [B, T', V], "ours.loss" [1], "ours.grad.<param>"); its __metadata__ is the
model's (SpeechCtcMetadata). This script runs, in float64 with autograd: ESPnet's
Conv2dSubsampling (nn.functional.conv2d, stride 2, no padding, ReLU, twice; [B, C, T', M'] ->
[B, T', C*M']; the linear projection), x * sqrt(D) + fairseq's sinusoidal positions (2 + t), the
encoder layers of fairseq's TransformerEncoderLayer (the reference layer code of
transformer_reference.py) with the frames past each utterance's subsampled length as padding,
the final layer norm (pre-norm), the CTC head and F.ctc_loss(reduction='sum', zero_infinity);
with "decoder_layers" in the metadata (joint CTC/attention) also fairseq's decoder
(transformer_reference.decoder_forward: tied output projection, label-smoothed loss) over
<sos> + transcript -> transcript + <eos>, where <sos/eos> is symbol V and blank pads, attending
to the encoder output with the padded frames masked; the loss is then
ctc_weight * CTC + (1 - ctc_weight) * attention. It compares the CTC logits (at the frames inside
each utterance; padded frames as 0 on both sides), the loss and every gradient.
"""
import math
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from transformer_reference import compare_case, decoder_forward, encoder_layers, read_safetensors, sinusoidal  # noqa: E402


def subsampled(n):
    return ((n - 1) // 2 - 1) // 2


def forward(p, meta, batch):
    D = int(meta["d_model"]); H = int(meta["heads"]); pre = meta["normalize_before"] == "true"
    act = meta["activation"]; blank = int(meta["blank"]); zero_inf = meta["zero_infinity"] == "true"
    feats, frames = batch["features"], batch["frames"]
    x = feats.unsqueeze(1)  # [B, 1, T, M]
    x = F.relu(F.conv2d(x, p["encoder.embed.conv.0.weight"], p["encoder.embed.conv.0.bias"], stride=2))
    x = F.relu(F.conv2d(x, p["encoder.embed.conv.2.weight"], p["encoder.embed.conv.2.bias"], stride=2))
    B, C, T2, M2 = x.shape
    x = x.permute(0, 2, 1, 3).reshape(B, T2, C * M2)
    x = F.linear(x, p["encoder.embed.out.0.weight"], p["encoder.embed.out.0.bias"])
    lengths = torch.tensor([subsampled(int(f)) for f in frames])
    pe = sinusoidal(T2 + 2, D, 1)
    x = math.sqrt(D) * x + pe[2:2 + T2].unsqueeze(0)
    pad = torch.arange(T2).unsqueeze(0) >= lengths.unsqueeze(1)  # [B, T']
    x = encoder_layers(p, x.transpose(0, 1), pad, int(meta["encoder_layers"]), H, pre, act)  # [T', B, D]
    logits = F.linear(x, p["ctc.ctc_lo.weight"], p["ctc.ctc_lo.bias"])  # [T', B, V]
    loss = F.ctc_loss(F.log_softmax(logits, dim=-1), batch["targets"], lengths, batch["target_lengths"], blank=blank,
                      reduction="sum", zero_infinity=zero_inf)
    if "decoder_layers" in meta:
        V = int(meta["tgt_vocab"]); w = float(meta["ctc_weight"]); eps = float(meta["label_smoothing"])
        lens = [int(n) for n in batch["target_lengths"]]
        Lt = max(lens) + 1
        tin = torch.full((B, Lt), blank, dtype=torch.long)
        tout = torch.full((B, Lt), blank, dtype=torch.long)
        for b, n in enumerate(lens):
            y = batch["targets"][b, :n]
            tin[b, 0] = V
            tin[b, 1:n + 1] = y
            tout[b, :n] = y
            tout[b, n] = V
        _, att = decoder_forward(p, meta, x, pad, tin, tout, D, H, blank, pre, act, eps,
                                 p["decoder.embed_tokens.weight"])
        loss = w * loss + (1 - w) * att
    # Padded frames' logits are never read by the loss: compared as 0 (the test zeroes the engine's too).
    return logits.transpose(0, 1).masked_fill(pad.unsqueeze(-1), 0.0), loss


def main():
    t, _ = read_safetensors(sys.argv[1])
    batch = {"features": torch.tensor(t["batch.features"], dtype=torch.float64),
             "frames": [int(v) for v in t["batch.frames"]],
             "targets": torch.tensor(t["batch.targets"]).long(),
             "target_lengths": torch.tensor(t["batch.target_lengths"]).long()}
    # compare_case reads batch.src / tgt_in / tgt_out: hand it the speech batch through forward_fn.
    for key in ("batch.src", "batch.tgt_in", "batch.tgt_out"):
        assert key in t, key + " placeholder missing"
    sys.exit(compare_case(sys.argv, __doc__, lambda p, meta, src, tin, tout: forward(p, meta, batch)))


if __name__ == "__main__":
    main()
