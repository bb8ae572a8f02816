"""A two-rank PyTorch DistributedDataParallel trial for the Core API end-to-end tests
(tests/e2e/core_api_test.cc): torch.distributed meets through the environment that
steadfast.core.init() sets (no launcher), each rank trains on its own shard of every step's
batch, and every checkpoint is sharded: each rank writes its own weights (rank<N>.pt), so a test
can check the ranks ended with identical weights.

Hyperparameters: lr, sleep (seconds after each step), checkpoint_every (steps), fail_rank (this
rank raises after every operation is done and rank 0 has reported it completed).
"""
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import steadfast

FEATURES = 8


def shard(step, rank, size, w_true):
    g = torch.Generator().manual_seed(100_000 + step * size + rank)
    x = torch.randn(16, FEATURES, generator=g)
    return x, x @ w_true


def main():
    with steadfast.core.init() as ctx:
        hp = ctx.info.hparams
        torch.set_num_threads(1)
        dist.init_process_group(ctx.distributed.torch_backend, init_method="env://")
        rank, size = dist.get_rank(), dist.get_world_size()
        assert rank == ctx.distributed.rank and size == ctx.distributed.size
        torch.manual_seed(0)
        w_true = torch.randn(FEATURES, 1, generator=torch.Generator().manual_seed(1234))
        model = DistributedDataParallel(torch.nn.Linear(FEATURES, 1))
        optimizer = torch.optim.SGD(model.parameters(), lr=float(hp.get("lr", 0.05)))
        steps = 0
        if ctx.info.latest_checkpoint:
            with ctx.checkpoint.restore_path(ctx.info.latest_checkpoint) as path:
                state = torch.load(os.path.join(path, f"rank{rank}.pt"))
            model.module.load_state_dict(state["model"])
            steps = state["steps"]
        print(f"rank {rank} of {size} starting at step {steps}", flush=True)

        def save():
            with ctx.checkpoint.store_path({"steps_completed": steps}, shard=True) as (path, _):
                torch.save({"model": model.module.state_dict(), "steps": steps}, os.path.join(path, f"rank{rank}.pt"))

        every = int(hp.get("checkpoint_every", 0))
        for op in ctx.searcher.operations():
            while steps < op.length:
                x, y = shard(steps, rank, size, w_true)
                loss = torch.nn.functional.mse_loss(model(x), y)
                optimizer.zero_grad()
                loss.backward()  # DDP averages the gradients of the ranks here
                optimizer.step()
                steps += 1
                ctx.train.report_training_metrics(steps_completed=steps, metrics={"loss": loss.item()})
                if every and steps % every == 0:
                    save()
                if ctx.preempt.should_preempt():
                    save()
                    return
                time.sleep(float(hp.get("sleep", 0)))
            validation = loss.item()
            ctx.train.report_validation_metrics(steps_completed=steps, metrics={"validation_loss": validation})
            save()
            op.report_completed(validation)
        dist.destroy_process_group()
        if "fail_rank" in hp and rank == int(hp["fail_rank"]):
            time.sleep(1)  # after rank 0 has told the master the operation is complete
            raise RuntimeError(f"rank {rank} failed after the last operation")


if __name__ == "__main__":
    sys.exit(main())
