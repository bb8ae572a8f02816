"""Who this trial is (Determined's ClusterInfo, flattened)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

__all__ = ["Info"]


@dataclass(frozen=True)
class Info:
    """What the script may want to know about its trial. Plain data; never fails.

    mode: "managed" (a task the agent started), "unmanaged" (a script started by hand that
    reports into an experiment of its own) or "local" (no master).
    """

    mode: str
    hparams: dict[str, Any] = field(default_factory=dict)
    trial_id: Optional[int] = None
    experiment_id: Optional[int] = None
    task_id: str = ""
    restart: int = 0
    #: The uuid of the checkpoint to resume from; None on a fresh start.
    latest_checkpoint: Optional[str] = None
    #: Where this trial's checkpoints go.
    checkpoint_dir: str = ""
    #: The experiment's YAML file (managed mode: SF_CONFIG_FILE); empty when there is none.
    config_file: str = ""
    #: The context directory as it was where the experiment was submitted (managed mode:
    #: SF_CONTEXT_DIRECTORY, absolute), for data beside the code on a shared filesystem
    #: (``os.path.join(ctx.info.context_directory, "../data")``); in local and unmanaged mode
    #: the running script's directory. In a task the code runs from a copy in its directory.
    context_directory: str = ""
    #: The trial's seed (Determined's ``trial_seed``), in [0, 2**31): derived by the master from
    #: the experiment's ``reproducibility.experiment_seed`` (else its id) and the trial, the
    #: same on every rank and restart, different for each trial of a search. Seed your RNGs
    #: with it (``torch.manual_seed(ctx.info.trial_seed)``). Local mode: SF_TRIAL_SEED, else 0.
    trial_seed: int = 0
