"""`steadfast.core.init()`: the Core API's entry point, and the Context it returns."""

from __future__ import annotations

import json
import os
import socket
import sys
import traceback
from dataclasses import dataclass
from typing import Any, Optional, Union

from ._checkpoint import Checkpoint
from ._distributed import Distributed, DistributedContext
from ._info import Info
from ._link import Link, Operation, TrialLinkError
from ._local_link import LocalTrialLink
from ._log_capture import LogShipper
from ._preempt import Preempt
from ._s3_storage import S3Storage, open_storage
from ._searcher import Searcher
from ._torch_env import set_torch_env
from ._train import Train

__all__ = ["Context", "init"]

MANAGED, UNMANAGED, LOCAL = "managed", "unmanaged", "local"


class Context:
    """Everything a trial script uses: `info`, `searcher`, `train`, `checkpoint`, `preempt`,
    `distributed`. Use it as a context manager (``with steadfast.core.init() as ctx:``), or
    call close() at the end.

    On leaving it: the metrics still pending are sent; a report the master refused for good is
    raised then (TrialLinkError), unless the block itself raised. An unmanaged trial's chief
    then tells the master it ended (EndTrial), as failed when the block raised.
    """

    def __init__(self, *, info: Info, link: Link, distributed: DistributedContext, train: Train,
                 searcher: Searcher, checkpoint: Checkpoint, preempt: Preempt) -> None:
        self.info = info
        self.distributed = distributed
        self.train = train
        self.searcher = searcher
        self.checkpoint = checkpoint
        self.preempt = preempt
        self._link = link
        self._closed = False
        self._logs: Optional[Any] = None  # unmanaged: the LogShipper of the script's output

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, exc_type: Any, exc: Optional[BaseException], tb: Any) -> None:
        self.close(exc)

    def close(self, exc: Optional[BaseException] = None) -> None:
        """Flushes metrics, stops the background threads and closes the link. `exc`: the
        exception that ends the script, if any (an unmanaged trial then ends as failed)."""
        if self._closed:
            return
        self._closed = True
        error: Optional[BaseException] = None
        try:
            self.train.close()
        except Exception as e:
            error = e
        self.preempt.close()
        try:
            if self._logs is not None:
                if exc is not None and not (isinstance(exc, SystemExit) and exc.code in (0, None)):
                    self._logs.add_text("stderr", "".join(traceback.format_exception(
                        type(exc), exc, exc.__traceback__)))
                self._logs.close()  # every line in before the trial ends
            if self.info.mode == UNMANAGED and self.distributed.rank == 0:
                ending = exc if exc is not None else error
                failed = ending is not None and not (
                    isinstance(ending, SystemExit) and ending.code in (0, None))
                try:
                    self._link.end_trial(failed, one_line(ending) if failed else "")
                except TrialLinkError as e:
                    if error is None and exc is None:
                        error = e
                    else:
                        print(f"{e}", file=sys.stderr, flush=True)
        finally:
            self._link.close()
        if error is not None and exc is None:
            raise error


def one_line(e: Optional[BaseException]) -> str:
    """"ExcType: the message's first line", for a trial's failure reason."""
    if e is None:
        return ""
    text = str(e).strip().splitlines()
    line = f"{type(e).__name__}: {text[0]}" if text else type(e).__name__
    return line[:1000]


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "")
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"steadfast: ${name} is {raw!r}, not an integer") from None


def _hparams_from_env() -> dict[str, Any]:
    raw = os.environ.get("SF_HPARAMS", "")
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError as e:
        raise ValueError(f"steadfast: $SF_HPARAMS is not JSON: {e}") from None
    if not isinstance(value, dict):
        raise ValueError(f"steadfast: $SF_HPARAMS is not a JSON object: {raw[:100]}")
    return value


def _choose_mode(local: bool, unmanaged: bool) -> str:
    if local and unmanaged:
        raise ValueError("steadfast: init(local=True, unmanaged=True): choose one")
    if local:
        return LOCAL
    if unmanaged:
        return UNMANAGED
    env = os.environ
    if env.get("SF_TRIAL_ID", "0") not in ("", "0") and env.get("SF_MASTER_ADDRESS"):
        return MANAGED
    if env.get("SF_MASTER") and env.get("SF_TOKEN"):
        return UNMANAGED
    return LOCAL


def _script_directory() -> str:
    """The directory of the script being run (`python3 path/to/train.py`), where its context
    directory is; the working directory when there is no script file (python3 -c, a REPL)."""
    main = sys.argv[0] if sys.argv else ""
    return os.path.dirname(os.path.abspath(main)) if main and os.path.isfile(main) else os.getcwd()


def _check_length(max_length: Optional[int]) -> int:
    if os.environ.get("SF_MAX_LENGTH"):
        # Outside a task, the environment's length wins over the script's default (to train a
        # resumed run further without editing the script).
        max_length = _env_int("SF_MAX_LENGTH", 1)
    if max_length is None:
        return 1
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
        raise ValueError(f"steadfast: init(max_length={max_length!r}): a positive int of batches")
    return max_length


def _read_ca(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise OSError(f"steadfast: {what} {path}: {e.strerror or e}") from None


def _remote_link_class() -> Any:
    """RemoteTrialLink, imported only where there is a master (grpc and the stubs)."""
    try:
        from ._trial_link import RemoteTrialLink
    except ImportError as e:
        raise ImportError(
            f"steadfast: talking to a master needs grpc, protobuf and the generated TrialLink "
            f"stubs (steadfast.v1): apt-get install python3-grpcio python3-protobuf, and use the "
            f"built package (build/python, or pip install ./python), not the sources: {e}"
        ) from e
    return RemoteTrialLink


def _assemble(info: Info, link: Link, dist: DistributedContext, *, label: str,
              synchronous: bool, only_operation: Optional[Operation], checkpoint_dir: str,
              restore_dir: str, poll: bool, storage: Optional[S3Storage]) -> Context:
    train = Train(link, label=label, chief=dist.rank == 0, synchronous=synchronous)
    searcher = Searcher(link, dist, train, label=label, only_operation=only_operation)
    checkpoint = Checkpoint(link, dist, label=label, checkpoint_dir=checkpoint_dir,
                            restore_dir=restore_dir, latest_uuid=info.latest_checkpoint,
                            storage=storage)
    preempt = Preempt(link, dist, label=label, steps=lambda: train.last_steps_completed, poll=poll)
    return Context(info=info, link=link, distributed=dist, train=train, searcher=searcher,
                   checkpoint=checkpoint, preempt=preempt)


def _check_fits_task(dist: DistributedContext, task_rank: int, task_size: int) -> None:
    """init(distributed=...) in a task: the context's workers must be the task's ranks, each
    of the SF_WORLD_SIZE ranks running dist.size / SF_WORLD_SIZE workers, numbered in order
    (worker w on task rank w // (dist.size / SF_WORLD_SIZE), as torchrun numbers the workers
    of its nodes). A collective: every worker learns every worker's SF_RANK and SF_WORLD_SIZE,
    so all of them raise the same ValueError when the context does not fit."""
    where = "steadfast: init(distributed=...)"
    seen = dist.allgather((task_rank, task_size))
    sizes = sorted({s for _, s in seen})
    if len(sizes) > 1:
        raise ValueError(f"{where}: the context's workers have different SF_WORLD_SIZE "
                         f"({', '.join(map(str, sizes))}): they are not the ranks of one task")
    if dist.size % task_size:
        raise ValueError(f"{where}: the context's size {dist.size} is not a multiple of the "
                         f"task's SF_WORLD_SIZE {task_size}: each of the task's ranks must run "
                         f"the same number of workers")
    per_rank = dist.size // task_size
    for worker, (rank, _) in enumerate(seen):
        if rank == worker // per_rank:
            continue
        if per_rank == 1:
            raise ValueError(f"{where}: the context's rank {worker} is not the task's rank "
                             f"(SF_RANK {rank}): with SF_WORLD_SIZE {task_size} == the "
                             f"context's size, each agent-started rank must be the context's "
                             f"worker of the same rank")
        raise ValueError(f"{where}: the context's rank {worker} runs in the task's rank "
                         f"SF_RANK {rank}, but with {per_rank} workers per task rank (size "
                         f"{dist.size} / SF_WORLD_SIZE {task_size}) it belongs in rank "
                         f"{worker // per_rank}")


def _init_managed(distributed: Optional[DistributedContext]) -> Context:
    RemoteTrialLink = _remote_link_class()
    env = os.environ
    trial_id = _env_int("SF_TRIAL_ID", 0)
    rank = _env_int("SF_RANK", 0)
    size = _env_int("SF_WORLD_SIZE", 1)
    if distributed is not None:
        _check_fits_task(distributed, rank, size)
    label = f"steadfast: trial {trial_id}"
    ca_file = env.get("SF_MASTER_CA_FILE", "")
    root = _read_ca(ca_file, "SF_MASTER_CA_FILE") if ca_file else None
    address = env["SF_MASTER_ADDRESS"]
    # With a context of the script's own, every worker of a task rank has that rank's identity;
    # only the context's chief calls the master for anything but reads.
    link = RemoteTrialLink(address=address, trial_id=trial_id, rank=rank,
                           task_id=env.get("SF_TASK_ID", ""), restart=_env_int("SF_RESTART", 0),
                           token=env.get("SF_TASK_TOKEN", ""), label=label, tls=root is not None,
                           root_certificates=root)
    try:
        checkpoint_dir = env.get("SF_CHECKPOINT_DIR", "")
        restore_dir = env.get("SF_RESTORE_CHECKPOINT", "")
        # Object storage (checkpoint_storage type s3), configured from the experiment's YAML;
        # before the first collective, so that every rank fails alike on a bad config.
        storage = open_storage((checkpoint_dir, restore_dir),
                               config_file=env.get("SF_CONFIG_FILE", ""))
        dist: DistributedContext
        if distributed is None:
            dist = Distributed(link, rank=rank, size=size,
                               local_rank=_env_int("SF_LOCAL_RANK", rank),
                               local_size=_env_int("SF_LOCAL_SIZE", size),
                               slot_ids=env.get("SF_SLOT_IDS", ""),
                               timeout_s=_env_int("SF_RENDEZVOUS_TIMEOUT_S", 300),
                               host=env.get("SF_AGENT_ID", ""))
            dist.learn_hosts()
        else:
            dist = distributed
        info = Info(mode=MANAGED, hparams=_hparams_from_env(), trial_id=trial_id,
                    experiment_id=_env_int("SF_EXPERIMENT_ID", 0) or None,
                    task_id=env.get("SF_TASK_ID", ""), restart=_env_int("SF_RESTART", 0),
                    latest_checkpoint=env.get("SF_LATEST_CHECKPOINT") or None,
                    checkpoint_dir=checkpoint_dir, config_file=env.get("SF_CONFIG_FILE", ""),
                    context_directory=env.get("SF_CONTEXT_DIRECTORY") or _script_directory(),
                    trial_seed=_env_int("SF_TRIAL_SEED", 0))
        if isinstance(dist, Distributed):
            set_torch_env(dist, master_address=address, overwrite=True)
    except BaseException:
        link.close()
        raise
    return _assemble(info, link, dist, label=label, synchronous=False,
                     only_operation=None, checkpoint_dir=checkpoint_dir,
                     restore_dir=restore_dir, poll=True, storage=storage)


@dataclass(frozen=True)
class _UnmanagedTrial:
    """What creating an unmanaged trial gave; the chief sends it to the other workers."""

    answer: dict[str, Any]  # the master's answer to POST /api/v1/unmanaged-trials
    url: str  # the master's REST URL
    config_text: str
    config_source: str  # where the config came from, for messages
    operation: Operation  # the one operation: the config's searcher.max_length
    root_certificates: Optional[bytes]  # the CA of an https master, when one is configured


def _create_unmanaged_trial(hparams: Optional[dict[str, Any]], max_length: Optional[int],
                            config: Union[None, dict[str, Any], str, os.PathLike[str]],
                            workspace: str) -> _UnmanagedTrial:
    from ..client import Client
    from ._unmanaged import config_text, default_config, max_length_of

    client = Client()
    if config is None:
        config = default_config(hparams or {}, _check_length(max_length))
    text, where = config_text(config)
    op = max_length_of(config if isinstance(config, dict) else text, where)
    answer = client.create_unmanaged_trial(text, workspace)
    if answer.get("errors"):
        problems = "; ".join(f"{e.get('path', '')}: {e.get('message', '')}"
                             for e in answer["errors"])
        raise ValueError(f"steadfast: the master refused the config ({where}): {problems}")
    tls = client.url.startswith("https://")
    root = _read_ca(client.ca_file, "CA file") if tls and client.ca_file else None
    return _UnmanagedTrial(answer=answer, url=client.url, config_text=text, config_source=where,
                           operation=op, root_certificates=root)


def _init_unmanaged(hparams: Optional[dict[str, Any]], max_length: Optional[int],
                    config: Union[None, dict[str, Any], str, os.PathLike[str]],
                    latest_checkpoint: Optional[str], workspace: str,
                    distributed: Optional[DistributedContext]) -> Context:
    RemoteTrialLink = _remote_link_class()
    # Only the chief creates the trial; the other workers get what it learnt, or its error.
    chief = distributed is None or distributed.rank == 0
    if not chief and distributed is not None:
        got = distributed.broadcast(None)
        if isinstance(got, str):
            raise RuntimeError(f"steadfast: init(distributed=...): the chief could not create "
                               f"the unmanaged trial: {got}")
        created = got
    else:
        try:
            created = _create_unmanaged_trial(hparams, max_length, config, workspace)
        except Exception as e:
            if distributed is not None:
                distributed.broadcast(one_line(e))
            raise
        if distributed is not None:
            distributed.broadcast(created)
    answer = created.answer
    trial = answer.get("trial") or {}
    trial_id = int(trial.get("id", 0))
    experiment_id = int((answer.get("experiment") or {}).get("id", 0)) or None
    label = f"steadfast: trial {trial_id}"
    task_id = answer.get("taskId", "")
    link = RemoteTrialLink(address=answer.get("trialLinkAddress", ""), trial_id=trial_id, rank=0,
                           task_id=task_id, restart=0, token=answer.get("taskToken", ""),
                           label=label, tls=created.url.startswith("https://"),
                           root_certificates=created.root_certificates)
    if chief:
        print(f"steadfast: unmanaged trial {trial_id} of experiment {experiment_id} on "
              f"{created.url}", file=sys.stderr, flush=True)
    try:
        dist = distributed if distributed is not None else Distributed(link)
        checkpoint_dir = answer.get("checkpointDir", "")
        storage = open_storage((checkpoint_dir,), config_text=created.config_text,
                               config_source=created.config_source)
        info = Info(mode=UNMANAGED,
                    hparams=dict(hparams) if hparams is not None else dict(trial.get("hparams") or {}),
                    trial_id=trial_id, experiment_id=experiment_id, task_id=task_id, restart=0,
                    latest_checkpoint=latest_checkpoint or None, checkpoint_dir=checkpoint_dir,
                    context_directory=_script_directory(),
                    trial_seed=int(answer.get("trialSeed", 0)))
        if isinstance(dist, Distributed):
            set_torch_env(dist, master_address="", overwrite=False)
    except BaseException:
        link.close()
        raise
    ctx = _assemble(info, link, dist, label=label, synchronous=False,
                    only_operation=created.operation, checkpoint_dir=checkpoint_dir,
                    restore_dir="", poll=True, storage=storage)
    if chief:
        # No agent captures an unmanaged script's output: the chief's goes to the trial's logs
        # from here.
        host = socket.gethostname()
        ctx._logs = LogShipper(lambda incarnation, sequence, lines:
                               link.report_logs(incarnation, sequence, lines, host))
        ctx._logs.start()
    return ctx


def _init_local(hparams: Optional[dict[str, Any]], max_length: Optional[int],
                local_dir: Optional[str], latest_checkpoint: Optional[str],
                distributed: Optional[DistributedContext]) -> Context:
    directory = os.path.abspath(local_dir or os.environ.get("SF_LOCAL_DIR") or "steadfast-local")
    os.makedirs(directory, exist_ok=True)
    checkpoint_dir = os.path.join(directory, "checkpoints")
    link = LocalTrialLink(directory)
    dist = distributed if distributed is not None else Distributed(link)
    info = Info(mode=LOCAL,
                hparams=dict(hparams) if hparams is not None else _hparams_from_env(),
                latest_checkpoint=latest_checkpoint or os.environ.get("SF_LATEST_CHECKPOINT") or None,
                checkpoint_dir=checkpoint_dir, context_directory=_script_directory(),
                trial_seed=_env_int("SF_TRIAL_SEED", 0))
    if isinstance(dist, Distributed):
        set_torch_env(dist, master_address="", overwrite=False)
    # A checkpoint to resume from may be on object storage (an s3:// SF_RESTORE_CHECKPOINT).
    restore_dir = os.environ.get("SF_RESTORE_CHECKPOINT", "")
    storage = open_storage((restore_dir,), config_file=os.environ.get("SF_CONFIG_FILE", ""))
    return _assemble(info, link, dist, label="steadfast: local trial", synchronous=True,
                     only_operation=Operation(_check_length(max_length), "batches"),
                     checkpoint_dir=checkpoint_dir, restore_dir=restore_dir, poll=False,
                     storage=storage)


def init(*, hparams: Optional[dict[str, Any]] = None, max_length: Optional[int] = None,
         local: bool = False, unmanaged: bool = False, local_dir: Optional[str] = None,
         latest_checkpoint: Optional[str] = None,
         config: Union[None, dict[str, Any], str, os.PathLike[str]] = None,
         workspace: str = "", distributed: Optional[DistributedContext] = None) -> Context:
    """The Core API's context for this process; see docs/core-api.md.

    The mode: managed inside a task (SF_TRIAL_ID and SF_MASTER_ADDRESS set by the agent);
    unmanaged with ``unmanaged=True`` or SF_MASTER and SF_TOKEN set (a new experiment of one
    trial on that master, from `config`: a dict or a YAML file's path; default: a single
    searcher of `max_length` batches with `hparams` as constants); else local (no master:
    metrics to stdout and `<local_dir>/metrics.jsonl`, checkpoints in
    `<local_dir>/checkpoints`; `local_dir` defaults to $SF_LOCAL_DIR, then ./steadfast-local).

    `hparams`, `max_length` and `local_dir` apply outside managed mode only (a task gets them
    from the master). Also sets the torch.distributed environment (MASTER_ADDR, MASTER_PORT,
    RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE) for ``init_method="env://"``.

    `distributed`: the script's own DistributedContext (from_torch_distributed(),
    from_horovod(hvd), from_deepspeed(), or the generic constructor), when a launcher of its
    own starts the workers (torchrun, Horovod, DeepSpeed, mpirun); every worker calls init()
    with it, in every mode. The Core API's collectives then go through it, and its rank 0 is
    the chief: the only worker that asks for operations, reports, stores plain checkpoints and
    polls for preemption; the others get its operations and should_preempt answers through the
    context. In a task each of the SF_WORLD_SIZE ranks runs size / SF_WORLD_SIZE of the
    workers, in rank order (a launcher inside a one-rank task runs them all). The
    torch.distributed environment is then left as the launcher set it.

    Raises ValueError for bad arguments or environment (a `distributed` that does not fit the
    task names both numbers, on every worker), ApiError when an unmanaged trial cannot be
    created, TrialLinkError when the ranks of a managed trial cannot meet.
    """
    mode = _choose_mode(local, unmanaged)
    if hparams is not None and not isinstance(hparams, dict):
        raise ValueError(f"steadfast: init(hparams=...) must be a dict, not "
                         f"{type(hparams).__name__}")
    if distributed is not None and (not isinstance(distributed, DistributedContext)
                                    or isinstance(distributed, Distributed)):
        what = ("another context's ctx.distributed" if isinstance(distributed, Distributed)
                else type(distributed).__name__)
        raise ValueError(f"steadfast: init(distributed=...) takes a DistributedContext of the "
                         f"script's own (DistributedContext.from_torch_distributed(), "
                         f"from_horovod(hvd), or DistributedContext(rank=, size=, allgather=)), "
                         f"not {what}")
    if mode == MANAGED:
        return _init_managed(distributed)
    if mode == UNMANAGED:
        return _init_unmanaged(hparams, max_length, config, latest_checkpoint, workspace,
                               distributed)
    return _init_local(hparams, max_length, local_dir, latest_checkpoint, distributed)
