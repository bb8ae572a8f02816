#!/usr/bin/python3
"""fairseq's `lstm` model (LSTMModel: encoder, decoder, additional_fc, fc_out) and its
label-smoothed loss in PyTorch, for engine_lstm_test.

Usage: lstm_model_reference.py CASE.safetensors [--tolerance 1e-5] [--weights MODEL.safetensors]

The case file holds every weight under fairseq's state_dict names, the batch ("batch.src",
"batch.tgt_in", "batch.tgt_out" I32 [B, S] / [B, T], right-padded), "input.pad" (I32 [1]) and
"input.eps" (the label smoothing, F32 [1]), and the engine's results ("ours.logits" [T*B, V]
time-major rows, "ours.loss" [1], "ours.grad.<param>"). This script runs the encoder and decoder
of lstm_encoder_reference.py / lstm_decoder_reference.py (no dropout), the decoder's initial
states through encoder_hidden_proj / encoder_cell_proj when present, additional_fc, fc_out or
the shared embedding, and fairseq's label_smoothed_nll_loss summed over non-pad targets; it
backpropagates with autograd and compares everything.

With --weights, the weights come from that file instead (a checkpoint's model.safetensors, read
by fairseq's names alone: what a PyTorch user loading our checkpoint does), and the case holds
the batch, the pad and eps and the engine's logits and loss only; gradients are not compared.
"""
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from lstm_decoder_reference import decoder_forward  # noqa: E402
from lstm_encoder_reference import encoder_forward  # noqa: E402
from lstm_reference import case_and_tolerance, compare  # noqa: E402
from transformer_reference import read_safetensors  # noqa: E402


def main():
    t, tolerance = case_and_tolerance(sys.argv)
    checkpoint = "--weights" in sys.argv
    if checkpoint:
        weights, _ = read_safetensors(sys.argv[sys.argv.index("--weights") + 1])
        t.update(weights)
    f64 = lambda name: torch.tensor(t[name], dtype=torch.float64).requires_grad_()  # noqa: E731
    pad = int(t["input.pad"][0])
    eps = float(t["input.eps"][0])
    src = torch.tensor(t["batch.src"]).long()
    tgt_in = torch.tensor(t["batch.tgt_in"]).long()
    tgt_out = torch.tensor(t["batch.tgt_out"]).long()

    enc_out, final_h, final_c, params = encoder_forward(t, "encoder.", src, pad)
    layers = sum(1 for k in t if k.startswith("decoder.layers.") and k.endswith(".weight_hh"))
    if "decoder.encoder_hidden_proj.weight" in t:
        for name in ("encoder_hidden_proj", "encoder_cell_proj"):
            for part in ("weight", "bias"):
                params[f"decoder.{name}.{part}"] = f64(f"decoder.{name}.{part}")
        proj = lambda name, x: F.linear(x, params[f"decoder.{name}.weight"], params[f"decoder.{name}.bias"])  # noqa
        h0 = [proj("encoder_hidden_proj", final_h[i]) for i in range(layers)]
        c0 = [proj("encoder_cell_proj", final_c[i]) for i in range(layers)]
    else:
        h0 = [final_h[i] for i in range(layers)]
        c0 = [final_c[i] for i in range(layers)]
    table = params["decoder.embed_tokens.weight"] = f64("decoder.embed_tokens.weight")
    x = F.embedding(tgt_in, table, padding_idx=pad).transpose(0, 1)
    y, decoder_params = decoder_forward(t, "decoder.", x, enc_out, src.eq(pad).t(), h0, c0)
    params.update(decoder_params)
    if "decoder.additional_fc.weight" in t:
        for part in ("weight", "bias"):
            params[f"decoder.additional_fc.{part}"] = f64(f"decoder.additional_fc.{part}")
        y = F.linear(y, params["decoder.additional_fc.weight"], params["decoder.additional_fc.bias"])
    if "decoder.fc_out.weight" in t:
        for part in ("weight", "bias"):
            params[f"decoder.fc_out.{part}"] = f64(f"decoder.fc_out.{part}")
        logits = F.linear(y, params["decoder.fc_out.weight"], params["decoder.fc_out.bias"])
    else:
        logits = F.linear(y, table)
    vocab = logits.shape[-1]
    logits = logits.reshape(-1, vocab)  # time-major rows, as the engine's
    target = tgt_out.t().reshape(-1)
    lprobs = F.log_softmax(logits, dim=-1)
    nll = -lprobs.gather(1, target.unsqueeze(1)).squeeze(1)
    smooth = -lprobs.sum(dim=-1)
    real = target.ne(pad)
    eps_i = eps / (vocab - 1)
    loss = ((1 - eps - eps_i) * nll + eps_i * smooth)[real].sum()
    loss.backward()

    pairs = [("loss", loss.reshape(1), t["ours.loss"]), ("logits", logits, t["ours.logits"])]
    for name, value in params.items():
        if not checkpoint:
            pairs.append((name, value.grad, t["ours.grad." + name]))
    sys.exit(compare(pairs, tolerance))


if __name__ == "__main__":
    main()
