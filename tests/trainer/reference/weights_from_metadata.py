#!/usr/bin/python3
"""Rebuilds a Steadfast model from a checkpoint's model.safetensors alone, as a PyTorch user would.

Usage: weights_from_metadata.py MODEL.safetensors CASE.safetensors [--tolerance 1e-4]

MODEL.safetensors is a checkpoint's weights file, read with json + numpy only. Its
__metadata__ must hold the model configuration (docs/model-format.md); from that alone this
script derives every parameter name and shape the architecture has, checks the file holds
exactly those tensors (no missing, no extra, F32, shapes equal), and runs the independent
float64 reference (transformer_reference.py) on the batch in CASE.safetensors ("batch.src",
"batch.tgt_in", "batch.tgt_out"). It compares with the engine's "ours.logits" and "ours.loss"
from the same file (relative error = max |ours - ref| / max |ref|). Prints one line per
comparison and the worst; exits 1 on a mismatch or a malformed weights file, 2 when a file
cannot be read.
"""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from transformer_reference import forward, read_safetensors, rel_err  # noqa: E402

KEYS = ["arch", "d_model", "heads", "encoder_layers", "decoder_layers", "ffn_dim", "activation",
        "normalize_before", "share_embeddings", "src_vocab", "tgt_vocab", "pad_id",
        "max_positions", "label_smoothing"]
# Keys added later, with the value files written before them mean.
OPTIONAL_KEYS = {"share_decoder_input_output_embed": "true"}


def expected_shapes(meta):
    """Parameter name -> shape, from the metadata alone (docs/model-format.md's table)."""
    C = int(meta["d_model"]); F = int(meta["ffn_dim"])
    Vs = int(meta["src_vocab"]); Vt = int(meta["tgt_vocab"])
    pre = meta["normalize_before"] == "true"
    shapes = {"encoder.embed_tokens.weight": [Vs, C]}
    if meta["share_embeddings"] != "true":
        shapes["decoder.embed_tokens.weight"] = [Vt, C]
    if meta.get("share_decoder_input_output_embed", "true") != "true":
        shapes["decoder.output_projection.weight"] = [Vt, C]

    def attn(prefix):
        shapes[prefix + ".in_proj_weight"] = [3 * C, C]
        shapes[prefix + ".in_proj_bias"] = [3 * C]
        shapes[prefix + ".out_proj.weight"] = [C, C]
        shapes[prefix + ".out_proj.bias"] = [C]

    def norm(name):
        shapes[name + ".weight"] = [C]
        shapes[name + ".bias"] = [C]

    def ffn(prefix):
        shapes[prefix + "fc1.weight"] = [F, C]
        shapes[prefix + "fc1.bias"] = [F]
        shapes[prefix + "fc2.weight"] = [C, F]
        shapes[prefix + "fc2.bias"] = [C]

    for i in range(int(meta["encoder_layers"])):
        q = "encoder.layers.%d." % i
        attn(q + "self_attn"); norm(q + "self_attn_layer_norm"); ffn(q); norm(q + "final_layer_norm")
    for i in range(int(meta["decoder_layers"])):
        q = "decoder.layers.%d." % i
        attn(q + "self_attn"); norm(q + "self_attn_layer_norm")
        attn(q + "encoder_attn"); norm(q + "encoder_attn_layer_norm")
        ffn(q); norm(q + "final_layer_norm")
    if pre:
        norm("encoder.layer_norm")
        norm("decoder.layer_norm")
    return shapes


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model")
    parser.add_argument("case")
    parser.add_argument("--tolerance", type=float, default=1e-4)
    args = parser.parse_args()
    tol = args.tolerance
    try:
        weights, meta = read_safetensors(args.model)
        case, _ = read_safetensors(args.case)
    except Exception as e:  # noqa: BLE001 - report any unreadable file the same way
        print("cannot read %s / %s: %s" % (args.model, args.case, e))
        return 2
    missing_keys = [k for k in KEYS if k not in meta]
    if missing_keys:
        print("%s: __metadata__ lacks %s (has %s)" % (args.model, ", ".join(missing_keys), sorted(meta)))
        return 1
    print("metadata: " + ", ".join("%s=%s" % (k, meta.get(k, OPTIONAL_KEYS.get(k)))
                                   for k in KEYS + list(OPTIONAL_KEYS)))
    shapes = expected_shapes(meta)
    problems = []
    for name in sorted(set(shapes) | set(weights)):
        if name not in weights:
            problems.append("missing tensor " + name)
        elif name not in shapes:
            problems.append("tensor %s is not part of the architecture the metadata describes" % name)
        elif list(weights[name].shape) != shapes[name]:
            problems.append("%s has shape %s, the metadata implies %s" % (name, list(weights[name].shape), shapes[name]))
        elif weights[name].dtype != np.float32:
            problems.append("%s is %s, not F32" % (name, weights[name].dtype))
    if problems:
        print("\n".join(problems))
        return 1
    torch.set_num_threads(1)
    params = {n: torch.tensor(w, dtype=torch.float64) for n, w in weights.items()}
    src = torch.tensor(case["batch.src"], dtype=torch.long)
    tin = torch.tensor(case["batch.tgt_in"], dtype=torch.long)
    tout = torch.tensor(case["batch.tgt_out"], dtype=torch.long)
    with torch.no_grad():
        logits, loss = forward(params, meta, src, tin, tout)
    results = [("logits", rel_err(case["ours.logits"], logits.numpy())),
               ("loss", rel_err(case["ours.loss"], loss.numpy().reshape(1)))]
    for name, err in results:
        print("%-10s rel_err %.3e" % (name, err))
    worst = max(results, key=lambda r: r[1])
    print("worst: %s rel_err %.3e (tolerance %.1e), %d tensors, loss ours %.6f torch %.6f" % (
        worst[0], worst[1], tol, len(weights), float(case["ours.loss"][0]), float(loss)))
    return 0 if worst[1] <= tol else 1


if __name__ == "__main__":
    sys.exit(main())
