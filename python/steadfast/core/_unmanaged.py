"""Unmanaged mode: a script started by hand, outside the scheduler, makes an experiment of one
trial on the master (REST POST /api/v1/unmanaged-trials) and reports into it over TrialLink.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from typing import Any, Optional, Union

from ._link import Operation

__all__ = ["default_config", "config_text", "max_length_of"]


def default_config(hparams: dict[str, Any], max_length: Optional[int]) -> dict[str, Any]:
    """The experiment config when init() gets none: named for the script, its command line as
    the entrypoint, a single searcher of `max_length` batches (default 1), and `hparams` as
    constants."""
    script = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return {
        "name": script or "unmanaged",
        "entrypoint": shlex.join(["python3", *sys.argv]) if script else "python3",
        "searcher": {"name": "single", "metric": "validation_loss",
                     "max_length": {"batches": int(max_length or 1)}},
        # Wrapped as consts: a dict value would otherwise read as a search space or a group.
        "hyperparameters": {k: {"type": "const", "val": v} for k, v in hparams.items()},
    }


def config_text(config: Union[dict[str, Any], str, os.PathLike[str]]) -> tuple[str, str]:
    """(the config as YAML text, where it came from). A dict is written as JSON, which is YAML;
    a path is read as it is."""
    if isinstance(config, dict):
        return json.dumps(config, indent=2), "init(config=...)"
    path = os.fspath(config)
    with open(path, encoding="utf-8") as f:
        return f.read(), path


_FLOW = re.compile(r"\bmax_length\s*:\s*\{\s*(batches|epochs)\s*:\s*(\d+)\s*\}")
_BLOCK = re.compile(r"\bmax_length\s*:\s*(?:#[^\n]*)?\n(?:\s*(?:#[^\n]*)?\n)*\s+(batches|epochs)"
                    r"\s*:\s*(\d+)")
_JSON = re.compile(r'"max_length"\s*:\s*\{\s*"(batches|epochs)"\s*:\s*(\d+)\s*\}')


def max_length_of(config: Union[dict[str, Any], str], where: str) -> Operation:
    """The one operation of an unmanaged trial: the config's searcher.max_length.

    `config` is a dict, or YAML text (read without a YAML library: the forms
    ``max_length: {batches: N}`` and a block with ``batches: N`` on the next line, as JSON
    too). Raises ValueError naming `where` when none is found.
    """
    if isinstance(config, dict):
        searcher = config.get("searcher") or {}
        length = searcher.get("max_length") if isinstance(searcher, dict) else None
        if isinstance(length, dict) and len(length) == 1:
            ((unit, n),) = length.items()
            if unit in ("batches", "epochs") and isinstance(n, int) and not isinstance(n, bool):
                return Operation(n, unit)
        raise ValueError(f"steadfast: {where}: searcher.max_length must be {{batches: N}} or "
                         f"{{epochs: N}}, got {length!r}")
    for pattern in (_JSON, _FLOW, _BLOCK):
        m = pattern.search(config)
        if m:
            return Operation(int(m.group(2)), m.group(1))
    raise ValueError(f"steadfast: {where}: no searcher.max_length like {{batches: N}} found")
