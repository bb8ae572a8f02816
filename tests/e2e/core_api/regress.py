"""A small PyTorch trial for the Core API end-to-end tests (tests/e2e/core_api_test.cc).

Linear regression on seeded synthetic data, trained one step at a time to the lengths the
searcher asks for: every step reports its loss, each operation ends with a validation, a
checkpoint and report_completed, and a pause or preemption checkpoints and returns. The same
script runs outside the cluster (local mode) with the same numbers.

Hyperparameters (all optional): lr, batch, seed; and, to drive the tests,
  sleep             seconds to wait after each step (so a test can act mid-operation)
  checkpoint_every  steps between checkpoints (there is one at each operation's end too)
  fail_at           raise ValueError("bad shape") at this step
  exit_early        return without completing the first operation
  bad_metric_at     report a metric that is not a number at this step
  backwards_at      report steps_completed going backwards at this step
  invalid_above     report_early_exit(INVALID_HP) and return when lr is above this
  early_exit, early_exit_at
                    report_early_exit(<early_exit>: ERRORED or USER_REQUESTED_STOP) and return
                    once early_exit_at steps are trained (and reported); "" does nothing
"""
import json
import os
import sys
import time

import torch

import steadfast

FEATURES = 8


def batch(step, size, w_true):
    """The step's batch: the same for a given step, whichever run or process computes it."""
    g = torch.Generator().manual_seed(10_000 + step)
    x = torch.randn(size, FEATURES, generator=g)
    return x, x @ w_true + 0.01 * torch.randn(size, 1, generator=g)


def main():
    # Outside a cluster's task (local or unmanaged mode) the hyperparameters come from
    # $SF_HPARAMS and the one operation is max_length batches; in a task the searcher decides both.
    with steadfast.core.init(max_length=20, hparams=json.loads(os.environ.get("SF_HPARAMS") or "{}")) as ctx:
        hp = ctx.info.hparams
        torch.set_num_threads(1)
        torch.manual_seed(int(hp.get("seed", 0)))
        w_true = torch.randn(FEATURES, 1, generator=torch.Generator().manual_seed(1234))
        model = torch.nn.Linear(FEATURES, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=float(hp.get("lr", 0.05)))
        size = int(hp.get("batch", 32))
        steps = 0
        if ctx.info.latest_checkpoint:
            with ctx.checkpoint.restore_path(ctx.info.latest_checkpoint) as path:
                state = torch.load(os.path.join(path, "state.pt"))
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            steps = state["steps"]
        print(f"starting at step {steps}", flush=True)

        def save():
            with ctx.checkpoint.store_path({"steps_completed": steps}) as (path, _):
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "steps": steps},
                           os.path.join(path, "state.pt"))

        x_valid, y_valid = batch(-1, 256, w_true)
        every = int(hp.get("checkpoint_every", 0))
        for op in ctx.searcher.operations():
            if hp.get("exit_early"):
                print("returning without completing the operation", flush=True)
                return
            if "invalid_above" in hp and float(hp.get("lr", 0.05)) > float(hp["invalid_above"]):
                ctx.train.report_early_exit(steadfast.core.EarlyExitReason.INVALID_HP)
                return
            while steps < op.length:
                x, y = batch(steps, size, w_true)
                loss = torch.nn.functional.mse_loss(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                steps += 1
                if steps == hp.get("fail_at"):
                    raise ValueError("bad shape")
                if hp.get("early_exit") and steps == hp.get("early_exit_at"):
                    ctx.train.report_training_metrics(steps_completed=steps, metrics={"loss": loss.item()})
                    ctx.train.report_early_exit(steadfast.core.EarlyExitReason[hp["early_exit"]])
                    return
                metrics = {"loss": loss.item()}
                if steps == hp.get("bad_metric_at"):
                    metrics = {"loss": "abc"}
                reported = steps - 2 if steps == hp.get("backwards_at") else steps
                ctx.train.report_training_metrics(steps_completed=reported, metrics=metrics)
                op.report_progress(steps)
                if every and steps % every == 0:
                    save()
                if ctx.preempt.should_preempt():
                    save()
                    print(f"stopping at step {steps} as the master asked", flush=True)
                    return
                time.sleep(float(hp.get("sleep", 0)))
            with torch.no_grad():
                validation = torch.nn.functional.mse_loss(model(x_valid), y_valid).item()
            ctx.train.report_validation_metrics(steps_completed=steps, metrics={"validation_loss": validation})
            # A group of the trial's own (Determined's report_metrics): stored, never searched on.
            ctx.train.report_metrics("inference", steps, {"examples": len(x_valid)})
            save()
            op.report_completed(validation)
            print(f"experiment best validation: {ctx.train.get_experiment_best_validation()!r}", flush=True)
        print(f"done at step {steps}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
