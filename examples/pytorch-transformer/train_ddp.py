"""The Multi30k nn.Transformer of examples/pytorch-transformer, trained data-parallel with
DistributedDataParallel on every slot of the trial (resources.slots_per_trial), through
Steadfast's Core API. No launcher: each slot runs this script, and steadfast.core.init() sets
the environment torch.distributed's env:// rendezvous reads. Without a master (local mode) it
runs as one rank:

    /usr/bin/python3 train_ddp.py                # 600 batches, world size 1, ./steadfast-local

Only what differs from examples/pytorch-transformer/train.py is new here: each rank trains on
its shard of every batch, metrics and validation are summed over the ranks, and the chief
writes the checkpoints. It shares model.py with train.py.
"""

import argparse
import os
import sys
import time

# One thread unless told otherwise (an agent sets OMP_NUM_THREADS for its CPU slots). Set
# before torch loads: the OpenBLAS of Debian's torch sizes its thread pool then, and
# torch.set_num_threads() does not reach it.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import steadfast
from model import (PAD, Translator, batch_indices, build_vocabs, collate, corpus_bleu, encode_pairs, evaluate,
                   hyperparameters, inverse_sqrt, read_split, read_vocabs, resolve_data_dir, train_step,
                   write_vocabs)


def all_sum(values):
    """`values` (numbers) summed over the ranks, on every rank."""
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t)
    return t.tolist()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-length", type=int, default=600,
                        help="local mode only: batches to train (on a cluster the searcher "
                             "decides)")
    args = parser.parse_args()

    with steadfast.core.init(max_length=args.max_length) as ctx:
        # init() has met the other ranks and set MASTER_ADDR/PORT, RANK and WORLD_SIZE.
        dist.init_process_group(ctx.distributed.torch_backend, init_method="env://")
        try:
            return train(ctx)
        finally:
            dist.destroy_process_group()


def train(ctx):
    rank, world = dist.get_rank(), dist.get_world_size()
    chief = rank == 0
    hp = hyperparameters(ctx.info.hparams)
    if hp["device"] == "cuda":
        raise ValueError("train_ddp.py trains on CPUs (the gloo backend): hyperparameter device must be auto or cpu")
    if hp["batch_size"] < world:
        raise ValueError(f"batch_size {hp['batch_size']} is less than the {world} ranks")
    data_dir = resolve_data_dir(ctx.info.context_directory, hp["data_dir"])
    train_pairs = read_split(data_dir, "train")
    valid_pairs = read_split(data_dir, "valid")
    torch.manual_seed(hp["seed"])  # the same initial weights on every rank

    # Every rank reads the checkpoint (a directory every rank of the trial can see).
    state = None
    if ctx.info.latest_checkpoint:
        with ctx.checkpoint.restore_path(ctx.info.latest_checkpoint) as path:
            state = torch.load(os.path.join(path, "state.pt"))
            src_vocab, tgt_vocab = read_vocabs(path)
    else:
        src_vocab, tgt_vocab = build_vocabs(train_pairs, hp["min_freq"])
    train_set = encode_pairs(train_pairs, src_vocab, tgt_vocab)
    # This rank's shard of the validation set; the sums are added up over the ranks.
    valid = encode_pairs(valid_pairs[rank::world], src_vocab, tgt_vocab)
    references = [t for _, t in valid_pairs[rank::world]]

    model = Translator(len(src_vocab), len(tgt_vocab), hp)
    optimizer = torch.optim.Adam(model.parameters(), lr=hp["lr"], betas=(0.9, 0.98), eps=1e-9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, inverse_sqrt(hp["warmup"]))
    criterion = nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=hp["label_smoothing"])
    torch.manual_seed(hp["seed"] * 1000 + rank)  # dropout: a different stream on each rank
    steps = 0
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        if len(state["rng"]) == world:  # else the world size changed: keep the fresh seed
            torch.set_rng_state(state["rng"][rank])
        steps = state["steps"]
    saved_at = steps if state is not None else None
    ddp = DistributedDataParallel(model)  # averages the gradients of the ranks in backward()
    if chief:
        print(f"{ctx.info.mode} trial, {world} rank(s): "
              f"{sum(p.numel() for p in model.parameters())} parameters, vocabularies de "
              f"{len(src_vocab)} en {len(tgt_vocab)}, data {data_dir}, starting at batch {steps}",
              flush=True)

    def save():
        """The chief writes the checkpoint (with every rank's RNG state); the other ranks wait
        until it is stored. Every rank calls it at the same points."""
        nonlocal saved_at
        if saved_at == steps:
            return
        rng = [None] * world
        dist.all_gather_object(rng, torch.get_rng_state())
        if chief:
            with ctx.checkpoint.store_path({"steps_completed": steps}) as (path, _):
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "scheduler": scheduler.state_dict(), "rng": rng, "steps": steps},
                           os.path.join(path, "state.pt"))
                write_vocabs(path, src_vocab, tgt_vocab)
        dist.barrier()
        saved_at = steps

    for op in ctx.searcher.operations():  # every rank gets the chief's operations
        if op.unit != "batches":
            raise ValueError(f"searcher.max_length is in {op.unit}: this script counts batches")
        ddp.train()
        loss_sum, tokens, started = 0.0, 0, time.monotonic()
        while steps < op.length:
            # The same global batch as the single-slot example; this rank takes every
            # world-th pair of it.
            shard = batch_indices(steps, len(train_set), hp["batch_size"], hp["seed"])[rank::world]
            # DDP averages the gradients of the ranks in backward().
            loss, n, lr = train_step(ddp, collate([train_set[i] for i in shard]), criterion, optimizer, scheduler,
                                     hp["clip_norm"])
            steps += 1
            loss_sum, tokens = loss_sum + loss * n, tokens + n
            if steps % hp["report_every"] == 0 or steps == op.length:
                loss_sum, tokens = all_sum([loss_sum, tokens])  # every rank, same steps
                # Reported by every rank; the library keeps the chief's and drops the others'.
                ctx.train.report_training_metrics(steps_completed=steps, metrics={
                    "loss": loss_sum / tokens,
                    "tokens_per_second": tokens / (time.monotonic() - started),
                    "lr": lr})
                loss_sum, tokens, started = 0.0, 0, time.monotonic()
            op.report_progress(steps)
            # The chief's answer, passed to every rank: all of them stop at the same batch.
            if ctx.preempt.should_preempt():
                save()
                if chief:
                    print(f"stopping at batch {steps}: the master asked", flush=True)
                return 0

        # Each rank decodes its shard; the loss and BLEU statistics are sums, so adding them
        # up over the ranks gives the whole validation set's.
        loss_sum, tokens, stats = evaluate(model, valid, references, tgt_vocab)
        loss_sum, tokens, *stats = all_sum([loss_sum, tokens, *stats])
        bleu = corpus_bleu(stats)
        ctx.train.report_validation_metrics(steps_completed=steps, metrics={
            "validation_loss": loss_sum / tokens, "bleu": bleu})
        save()
        op.report_completed(bleu)  # on every rank; the chief's completes the operation
    if chief:
        print(f"done at batch {steps}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
