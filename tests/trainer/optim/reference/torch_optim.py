"""Runs torch.optim on the parameters and gradients a C++ test wrote, and writes the results.

usage: /usr/bin/python3 torch_optim.py IN.safetensors OUT.safetensors

IN holds, as F32 tensors, "param.<name>" (initial weights) and "grad.<step>.<name>" (the
gradient for update <step>, 1-based), and in __metadata__: type (adamw|radam|sgd), steps, lr,
beta1, beta2, eps, weight_decay, momentum, nesterov (0/1), decoupled (0/1, radam only),
no_decay (comma-separated parameter names excluded from weight decay).
OUT gets "param.<name>" after all steps and the optimizer state "state.<name>.<buffer>".
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np  # noqa: E402


def main():
    src, dst = sys.argv[1], sys.argv[2]
    tensors, meta = safetensors_np.load(src)
    torch.set_num_threads(1)
    kind = meta["type"]
    steps = int(meta["steps"])
    lr = float(meta["lr"])
    betas = (float(meta["beta1"]), float(meta["beta2"]))
    eps = float(meta["eps"])
    wd = float(meta["weight_decay"])
    no_decay = set(filter(None, meta.get("no_decay", "").split(",")))
    names = sorted(n[len("param."):] for n in tensors if n.startswith("param."))
    params = {n: torch.tensor(tensors["param." + n]).requires_grad_(True) for n in names}

    decoupled = kind == "radam" and meta.get("decoupled", "0") == "1"
    group_wd = 0.0 if decoupled else wd
    groups = [
        {"params": [params[n] for n in names if n not in no_decay], "weight_decay": group_wd},
        {"params": [params[n] for n in names if n in no_decay], "weight_decay": 0.0},
    ]
    groups = [g for g in groups if g["params"]]
    if kind == "adamw":
        opt = torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, foreach=False)
    elif kind == "radam":
        opt = torch.optim.RAdam(groups, lr=lr, betas=betas, eps=eps, foreach=False)
    elif kind == "sgd":
        opt = torch.optim.SGD(groups, lr=lr, momentum=float(meta["momentum"]),
                              nesterov=meta["nesterov"] == "1", foreach=False)
    else:
        raise SystemExit("unknown optimizer type " + kind)

    for step in range(1, steps + 1):
        for n in names:
            params[n].grad = torch.tensor(tensors["grad.%d.%s" % (step, n)])
        if decoupled:
            # torch >= 2.0 RAdam(decoupled_weight_decay=True): p *= 1 - lr * wd, then the
            # update without L2. torch 1.13 lacks the flag, so it is spelled out here.
            with torch.no_grad():
                for n in names:
                    if n not in no_decay:
                        params[n].mul_(1 - lr * wd)
        opt.step()

    out = {}
    for n in names:
        out["param." + n] = params[n].detach().numpy()
        for key, value in opt.state[params[n]].items():
            if torch.is_tensor(value) and value.numel() == params[n].numel():
                out["state.%s.%s" % (n, key)] = value.detach().numpy()
    safetensors_np.save(dst, out, {"torch_version": torch.__version__})


if __name__ == "__main__":
    main()
