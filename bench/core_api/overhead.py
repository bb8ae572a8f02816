"""The Core API's cost to a training loop (bench/core_api.sh): run as a trial, it times the same
loop with and without a metric report per step, in alternating repetitions, and prints the
figures (and reports them as validation metrics).

A step is step_ms of real work (a fixed matmul loop, calibrated once), so the loop reports at
1000 / step_ms reports per second: 20 at the default 50 ms. Sizes come from the trial's
hyperparameters step_ms, steps and repeats.
"""
import statistics
import time

import torch

import steadfast


def main():
    with steadfast.core.init(max_length=1) as ctx:
        hp = ctx.info.hparams
        step_ms = float(hp.get("step_ms", 50))
        steps = int(hp.get("steps", 100))
        repeats = int(hp.get("repeats", 5))
        torch.set_num_threads(1)
        a = torch.randn(128, 128)
        # Calibrate: how many matmuls make step_ms of work.
        t0 = time.perf_counter()
        for _ in range(200):
            a = torch.tanh(a @ a)
        inner = max(1, int(step_ms / 1000 / ((time.perf_counter() - t0) / 200)))

        def work():
            nonlocal a
            for _ in range(inner):
                a = torch.tanh(a @ a)
            return float(a[0, 0])

        step = 0
        plain, reported = [], []

        def without_reports():
            t = time.perf_counter()
            for _ in range(steps):
                work()
            plain.append(time.perf_counter() - t)

        def with_reports():
            nonlocal step
            t = time.perf_counter()
            for _ in range(steps):
                x = work()
                step += 1
                ctx.train.report_training_metrics(steps_completed=step, metrics={"loss": x})
            reported.append(time.perf_counter() - t)

        # ABBA order, so a drift in the machine's speed favours neither.
        for rep in range(repeats):
            first, second = (without_reports, with_reports) if rep % 2 == 0 else (with_reports, without_reports)
            first()
            second()
        # The call alone, many times: what the training thread pays per report.
        calls = 10000
        t = time.perf_counter()
        for i in range(calls):
            ctx.train.report_training_metrics(steps_completed=step + 1 + i, metrics={"loss": 0.5})
        per_call_us = (time.perf_counter() - t) / calls * 1e6
        step += calls
        p, r = statistics.median(plain), statistics.median(reported)
        overhead = (r - p) / p
        print(f"steps per repetition: {steps} x {step_ms:.0f} ms ({1000 / step_ms:.0f} reports/s); "
              f"repetitions: {repeats}")
        print(f"without reports: median {p:.3f} s   with a report per step: median {r:.3f} s")
        print(f"overhead: {100 * overhead:.2f}%   one report call: {per_call_us:.1f} us", flush=True)
        for op in ctx.searcher.operations():
            ctx.train.report_validation_metrics(steps_completed=step, metrics={
                "overhead_percent": 100 * overhead, "report_call_us": per_call_us})
            op.report_completed(100 * overhead)


if __name__ == "__main__":
    main()
