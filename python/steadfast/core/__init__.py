"""The Core API: what a trial script uses to talk to the cluster (docs/core-api.md).

    import steadfast
    with steadfast.core.init() as ctx:
        for op in ctx.searcher.operations():
            ...
            ctx.train.report_training_metrics(steps_completed=n, metrics={"loss": loss})
            ...
            op.report_completed(validation_loss)

The names and behaviour follow Determined's Core API (`det.core.init()`).
"""

from ._checkpoint import Checkpoint
from ._context import Context, init
from ._distributed import Distributed, DistributedContext
from ._info import Info
from ._link import EarlyExitReason, TrialLinkError
from ._preempt import Preempt
from ._s3_storage import DamagedCheckpointError, StorageError
from ._searcher import Searcher, SearcherOperation
from ._train import Train

__all__ = ["init", "Context", "Info", "Searcher", "SearcherOperation", "Train", "Checkpoint",
           "Preempt", "Distributed", "DistributedContext", "TrialLinkError", "EarlyExitReason",
           "StorageError", "DamagedCheckpointError"]
