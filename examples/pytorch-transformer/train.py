"""A small nn.Transformer translating German to English (Multi30k), trained through Steadfast's
Core API: hyperparameters from the searcher, metrics to the master, checkpoints and resume,
pause and preemption. The same script runs on a laptop without a master (local mode):

    /usr/bin/python3 train.py                    # 600 batches; metrics printed, ./steadfast-local
    SF_LATEST_CHECKPOINT=<uuid> /usr/bin/python3 train.py --max-length 900   # resume, go on

See README.md; the model, tokenizer and BLEU are in model.py.
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
from torch import nn

import steadfast
from model import (PAD, Translator, batch_indices, build_vocabs, collate, corpus_bleu, encode_pairs, evaluate,
                   hyperparameters, inverse_sqrt, pick_device, read_split, read_vocabs, resolve_data_dir,
                   train_step, write_vocabs)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-length", type=int, default=600,
                        help="local mode only: batches to train (on a cluster the searcher "
                             "decides)")
    args = parser.parse_args()

    with steadfast.core.init(max_length=args.max_length) as ctx:
        hp = hyperparameters(ctx.info.hparams)
        data_dir = resolve_data_dir(ctx.info.context_directory, hp["data_dir"])
        train_pairs = read_split(data_dir, "train")
        valid_pairs = read_split(data_dir, "valid")
        torch.manual_seed(hp["seed"])
        device = pick_device(hp["device"])

        # Resume: the trial's latest checkpoint (a restart after a failure, a pause, the next
        # rung of ASHA) or, in local mode, $SF_LATEST_CHECKPOINT.
        state = None
        if ctx.info.latest_checkpoint:
            with ctx.checkpoint.restore_path(ctx.info.latest_checkpoint) as path:
                state = torch.load(os.path.join(path, "state.pt"), map_location="cpu")
                src_vocab, tgt_vocab = read_vocabs(path)
        else:
            src_vocab, tgt_vocab = build_vocabs(train_pairs, hp["min_freq"])
        train = encode_pairs(train_pairs, src_vocab, tgt_vocab)
        valid = encode_pairs(valid_pairs, src_vocab, tgt_vocab)
        references = [t for _, t in valid_pairs]

        model = Translator(len(src_vocab), len(tgt_vocab), hp).to(device)
        optimizer = torch.optim.Adam(model.parameters(), lr=hp["lr"], betas=(0.9, 0.98), eps=1e-9)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, inverse_sqrt(hp["warmup"]))
        criterion = nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=hp["label_smoothing"])
        steps = 0
        if state is not None:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            scheduler.load_state_dict(state["scheduler"])
            torch.set_rng_state(state["rng"])
            if device.type == "cuda" and "cuda_rng" in state:
                torch.cuda.set_rng_state(state["cuda_rng"])  # dropout's masks, as the CPU's above
            steps = state["steps"]
        saved_at = steps if state is not None else None
        print(f"{ctx.info.mode} trial on {device}: {sum(p.numel() for p in model.parameters())} parameters, "
              f"vocabularies de {len(src_vocab)} en {len(tgt_vocab)}, data {data_dir}, "
              f"starting at batch {steps}", flush=True)

        def save():
            """A checkpoint of everything a resumed run needs to go on exactly where this one
            is; skipped when the latest checkpoint already holds this step."""
            nonlocal saved_at
            if saved_at == steps:
                return
            with ctx.checkpoint.store_path({"steps_completed": steps}) as (path, _):
                extra = {"cuda_rng": torch.cuda.get_rng_state()} if device.type == "cuda" else {}
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "scheduler": scheduler.state_dict(), "rng": torch.get_rng_state(),
                            "steps": steps, **extra}, os.path.join(path, "state.pt"))
                write_vocabs(path, src_vocab, tgt_vocab)
            saved_at = steps

        for op in ctx.searcher.operations():  # train to op.length batches (the trial's total)
            if op.unit != "batches":
                raise ValueError(f"searcher.max_length is in {op.unit}: this script counts batches")
            model.train()
            loss_sum, tokens, started = 0.0, 0, time.monotonic()
            while steps < op.length:
                batch = collate([train[i] for i in batch_indices(steps, len(train), hp["batch_size"], hp["seed"])],
                                device)
                loss, n, lr = train_step(model, batch, criterion, optimizer, scheduler, hp["clip_norm"])
                steps += 1
                loss_sum, tokens = loss_sum + loss * n, tokens + n
                if steps % hp["report_every"] == 0 or steps == op.length:
                    ctx.train.report_training_metrics(steps_completed=steps, metrics={
                        "loss": loss_sum / tokens,
                        "tokens_per_second": tokens / (time.monotonic() - started),
                        "lr": lr})
                    loss_sum, tokens, started = 0.0, 0, time.monotonic()
                op.report_progress(steps)
                if ctx.preempt.should_preempt():  # paused, preempted or killed: save and go
                    save()
                    print(f"stopping at batch {steps}: the master asked", flush=True)
                    return 0

            loss_sum, tokens, stats = evaluate(model, valid, references, tgt_vocab)
            bleu = corpus_bleu(stats)
            ctx.train.report_validation_metrics(steps_completed=steps, metrics={
                "validation_loss": loss_sum / tokens, "bleu": bleu})
            save()
            op.report_completed(bleu)  # the searcher ranks trials by it (searcher.metric)
        print(f"done at batch {steps}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
