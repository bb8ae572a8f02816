"""Checkpoints: directories of files the script writes and restores (Determined's
CheckpointContext), kept in the experiment's checkpoint storage and known to the master like
the native trainer's (retention, `sf checkpoint`): a directory on a shared filesystem, or
objects in an S3 bucket (_s3_storage.py) stored and fetched through a local directory."""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import re
import shutil
import tempfile
import uuid as uuidlib
from typing import Any, Callable, Iterator, Optional

from ._distributed import DistributedContext
from ._link import CheckpointFile, Link
from ._s3_storage import S3Storage, is_s3_url
from ._train import check_steps

__all__ = ["Checkpoint", "list_files"]

_UUID_CHARS = re.compile(r"[A-Za-z0-9._-]+")


def _relative_files(root: str) -> list[str]:
    """Every regular file under `root`, relative and `/`-separated, sorted."""
    out = []
    for directory, dirs, files in os.walk(root):
        dirs.sort()
        rel_dir = os.path.relpath(directory, root)
        for name in files:
            full = os.path.join(directory, name)
            if os.path.isfile(full) and not os.path.islink(full):
                rel = name if rel_dir == "." else os.path.join(rel_dir, name)
                out.append(rel.replace(os.sep, "/"))
    return sorted(out)


def _describe_file(root: str, rel: str) -> CheckpointFile:
    """File `rel` ('/'-separated, under `root`) with its size and sha256."""
    h = hashlib.sha256()
    size = 0
    with open(os.path.join(root, *rel.split("/")), "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return CheckpointFile(rel, size, h.hexdigest())


def list_files(root: str) -> list[CheckpointFile]:
    """Every regular file under `root` with its size and sha256, sorted by path."""
    return [_describe_file(root, rel) for rel in _relative_files(root)]


def _write_metadata(directory: str, metadata: dict[str, Any]) -> None:
    with open(os.path.join(directory, "metadata.json"), "w", encoding="utf-8") as f:
        json.dump(metadata, f, indent=2, sort_keys=True)
        f.write("\n")


class Checkpoint:
    """Stores and restores checkpoints.

    `store_path(metadata)` gives a fresh directory ``<SF_CHECKPOINT_DIR>/<uuid>`` to write
    into; when the block ends normally, it writes ``metadata.json`` (the user's metadata) there,
    lists every file with its size and sha256, and reports the checkpoint to the master.
    Without `shard`, only the chief (rank 0) stores: on the other ranks the same call yields a
    scratch directory and an empty uuid, and what they write there is discarded, so every rank
    can run the same code. With ``shard=True`` every rank calls it and writes its own part, and
    the parts are merged into one checkpoint.

    On object storage (SF_CHECKPOINT_DIR an ``s3://`` URL, `checkpoint_storage: {type: s3}`)
    the directory yielded is a fresh local staging directory ``<tempdir>/sf-checkpoint-*/<uuid>``;
    when the block ends normally the files are stored under ``<SF_CHECKPOINT_DIR>/<uuid>``, the
    object manifest last (see _s3_storage.py), the checkpoint is reported with that URL as its
    path, and the staging directory is removed. With ``shard=True`` each rank uploads its own
    files and the chief writes metadata.json and the manifest once all have. `restore_path`,
    `get_metadata` and `download` fetch the checkpoint's objects and verify each against the
    manifest; one without a manifest (its upload never completed) or with an object that does
    not match is refused with DamagedCheckpointError.

    On failure: bad metadata (not a JSON-able dict with an int "steps_completed") raises
    ValueError before anything is created; an exception
    inside the block removes the directory, reports nothing and propagates (sharded: on every
    rank); a master that refuses the report raises TrialLinkError at the end of the block
    (the files stay). An upload that fails raises StorageError naming the URL, the endpoint and
    the server's answer, and nothing is reported (sharded: the other ranks raise RuntimeError
    naming the rank that failed). `restore_path` raises FileNotFoundError naming a uuid it
    cannot find.
    """

    def __init__(self, link: Link, dist: DistributedContext, *, label: str, checkpoint_dir: str,
                 restore_dir: str = "", latest_uuid: Optional[str] = None,
                 storage: Optional[S3Storage] = None) -> None:
        """`storage`: the object storage, required when `checkpoint_dir` or `restore_dir` is an
        ``s3://`` URL (ValueError otherwise)."""
        if storage is None and (is_s3_url(checkpoint_dir) or is_s3_url(restore_dir)):
            raise ValueError(f"{label}: checkpoints on {checkpoint_dir or restore_dir} need the "
                             f"experiment's object storage")
        self._link = link
        self._dist = dist
        self._label = label
        if is_s3_url(checkpoint_dir):
            self._dir = checkpoint_dir.rstrip("/")
        else:
            self._dir = os.path.abspath(checkpoint_dir) if checkpoint_dir else ""
        self._restore_dir = restore_dir
        self._latest = latest_uuid
        self._storage = storage

    @property
    def directory(self) -> str:
        """Where this trial's checkpoints go (SF_CHECKPOINT_DIR): a directory, or an ``s3://``
        URL on object storage; empty when unknown."""
        return self._dir

    def _storage_of(self, location: str) -> Optional[S3Storage]:
        """The object storage holding `location` when it is an ``s3://`` URL (the constructor
        made sure there is one); None for a directory."""
        return self._storage if is_s3_url(location) else None

    def _check_metadata(self, where: str, metadata: Any) -> tuple[dict[str, Any], int]:
        if not isinstance(metadata, dict):
            raise ValueError(f"{where}: metadata is {type(metadata).__name__}, not a dict")
        if "steps_completed" not in metadata:
            raise ValueError(f'{where}: metadata must include "steps_completed" (the trial\'s '
                             f'steps when the checkpoint was taken), e.g. '
                             f'{{"steps_completed": 100}}')
        try:
            steps = check_steps(where, metadata["steps_completed"])
        except TypeError as e:
            raise ValueError(str(e)) from None
        try:
            as_json = json.loads(json.dumps(metadata, allow_nan=False))
        except (TypeError, ValueError) as e:
            raise ValueError(f"{where}: metadata is not JSON: {e}") from None
        if not isinstance(as_json, dict) or not all(isinstance(k, str) for k in metadata):
            raise ValueError(f"{where}: metadata's keys must be strings")
        as_json["steps_completed"] = steps
        return as_json, steps

    def _finish(self, path: str, uuid: str, metadata: dict[str, Any], steps: int) -> None:
        """Completes the checkpoint in directory `path`: metadata.json, the file list, on object
        storage the upload (manifest last), then the report to the master."""
        _write_metadata(path, metadata)
        files = list_files(path)
        stored_at = path
        storage = self._storage_of(self._dir)
        if storage is not None:
            stored_at = f"{self._dir}/{uuid}"
            storage.store(path, stored_at, files)
        self._link.report_checkpoint(uuid, stored_at, steps, sum(f.size for f in files), files,
                                     metadata)

    @contextlib.contextmanager
    def store_path(self, metadata: dict[str, Any],
                   shard: bool = False) -> Iterator[tuple[str, str]]:
        """Yields (directory, uuid) to write a checkpoint into; see the class docstring.

        `metadata`: a JSON-able dict that must include "steps_completed" (int). It is saved as
        metadata.json and sent to the master.
        """
        where = f"{self._label}: store_path"
        meta, steps = self._check_metadata(where, metadata)
        if not self._dir:
            raise RuntimeError(f"{where}: this trial has no checkpoint directory "
                               f"(SF_CHECKPOINT_DIR is not set)")
        if shard:
            with self._store_sharded(where, meta, steps) as out:
                yield out
            return
        if self._dist.rank != 0:
            # Only the chief stores a plain checkpoint; the other ranks, running the same code,
            # write into a scratch directory that is discarded (the uuid is empty: nothing is
            # stored for them).
            scratch = tempfile.mkdtemp(prefix=f"sf-store-path-rank{self._dist.rank}-")
            try:
                yield scratch, ""
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            return
        uuid = str(uuidlib.uuid4())
        if self._storage_of(self._dir) is not None:
            # Staged: written locally, stored when the block ends, removed either way.
            staging = tempfile.mkdtemp(prefix="sf-checkpoint-")
            try:
                path = os.path.join(staging, uuid)
                os.makedirs(path)
                yield path, uuid
                self._finish(path, uuid, meta, steps)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
            return
        path = os.path.join(self._dir, uuid)
        os.makedirs(path)
        try:
            yield path, uuid
        except BaseException:
            shutil.rmtree(path, ignore_errors=True)
            raise
        self._finish(path, uuid, meta, steps)

    @contextlib.contextmanager
    def _store_sharded(self, where: str, meta: dict[str, Any],
                       steps: int) -> Iterator[tuple[str, str]]:
        dist = self._dist
        uuid = dist.broadcast(str(uuidlib.uuid4()) if dist.rank == 0 else None)
        storage = self._storage_of(self._dir)
        scratch = ""  # on object storage: this rank's local staging, removed at the end
        if storage is None:
            staging = os.path.join(self._dir, f".{uuid}.rank{dist.rank}")
        else:
            scratch = tempfile.mkdtemp(prefix=f"sf-checkpoint-rank{dist.rank}-")
            staging = os.path.join(scratch, uuid)
        try:
            os.makedirs(staging)
            error: Optional[BaseException] = None
            try:
                yield staging, uuid
            except BaseException as e:
                error = e
            files: list[str] = []
            listed: list[CheckpointFile] = []  # on object storage: with sizes and sha256
            mine = None
            if error is not None:
                mine = f"{type(error).__name__}: {error}"
            else:
                try:
                    if storage is None:
                        files = _relative_files(staging)
                    else:
                        listed = list_files(staging)
                        files = [f.path for f in listed]
                except OSError as e:
                    mine = f"{type(e).__name__}: {e}"
            parts = dist.allgather({"error": mine, "files": files, "listed": listed})
            failed = [r for r, p in enumerate(parts) if p["error"]]
            owner: dict[str, int] = {}
            conflicts: list[tuple[str, int, int]] = []
            for r, p in enumerate(parts):
                for f in p["files"]:
                    if f in owner:
                        conflicts.append((f, owner[f], r))
                    else:
                        owner[f] = r
            if failed or conflicts:
                shutil.rmtree(staging, ignore_errors=True)
                if error is not None:
                    raise error
                if failed:
                    r = failed[0]
                    raise RuntimeError(f"{where}: rank {r} failed while writing sharded "
                                       f"checkpoint {uuid} ({parts[r]['error']}); nothing was "
                                       f"stored")
                f, a, b = conflicts[0]
                more = f" (and {len(conflicts) - 1} more)" if len(conflicts) > 1 else ""
                raise RuntimeError(f"{where}: ranks {a} and {b} both wrote {f!r} into sharded "
                                   f"checkpoint {uuid}{more}; nothing was stored")
            if storage is None:
                self._merge_shards(where, uuid, staging, files, meta, steps)
            else:
                self._upload_shards(storage, where, uuid, staging, listed, parts, meta, steps)
        finally:
            if scratch:
                shutil.rmtree(scratch, ignore_errors=True)

    def _merge_shards(self, where: str, uuid: str, staging: str, files: list[str],
                      meta: dict[str, Any], steps: int) -> None:
        """Shared filesystem: each rank moves its own files into the checkpoint; then the chief
        completes it."""
        dist = self._dist
        final = os.path.join(self._dir, uuid)
        moved: Optional[str] = None
        try:
            for f in files:
                dst = os.path.join(final, *f.split("/"))
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                os.replace(os.path.join(staging, *f.split("/")), dst)
            os.makedirs(final, exist_ok=True)
            shutil.rmtree(staging, ignore_errors=True)
        except OSError as e:
            moved = f"{type(e).__name__}: {e}"
        outcomes = dist.allgather(moved)
        bad = [r for r, o in enumerate(outcomes) if o]
        if bad:
            raise RuntimeError(f"{where}: rank {bad[0]} could not move its files into "
                               f"{final}: {outcomes[bad[0]]}")
        self._chief_completes(where, uuid, lambda: self._finish(final, uuid, meta, steps))

    def _upload_shards(self, storage: S3Storage, where: str, uuid: str, staging: str,
                       listed: list[CheckpointFile], parts: list[dict[str, Any]],
                       meta: dict[str, Any], steps: int) -> None:
        """Object storage: each rank uploads its own files (metadata.json is the chief's to
        write); then the chief uploads metadata.json, writes the manifest of every rank's files
        (as each rank listed them) and reports."""
        dist = self._dist
        url = f"{self._dir}/{uuid}"
        uploaded: Optional[str] = None
        try:
            storage.upload_files(staging, url, [f for f in listed if f.path != "metadata.json"])
        except Exception as e:
            uploaded = f"{type(e).__name__}: {e}"
        outcomes = dist.allgather(uploaded)
        bad = [r for r, o in enumerate(outcomes) if o]
        if bad:
            raise RuntimeError(f"{where}: rank {bad[0]} could not upload its files of sharded "
                               f"checkpoint {uuid}: {outcomes[bad[0]]}; nothing was reported")

        def complete() -> None:
            _write_metadata(staging, meta)
            metadata_file = _describe_file(staging, "metadata.json")
            files = sorted([f for p in parts for f in p["listed"] if f.path != "metadata.json"]
                           + [metadata_file], key=lambda f: f.path)
            storage.upload_files(staging, url, [metadata_file])
            storage.write_manifest(url, files)
            self._link.report_checkpoint(uuid, url, steps, sum(f.size for f in files), files,
                                         meta)

        self._chief_completes(where, uuid, complete)

    def _chief_completes(self, where: str, uuid: str, complete: Callable[[], None]) -> None:
        """The chief runs `complete`; its outcome goes to every rank, so all of them raise when
        it failed (the chief its own exception, the others a RuntimeError naming it)."""
        dist = self._dist
        chief_error: Optional[str] = None
        failure: Optional[Exception] = None
        if dist.rank == 0:
            try:
                complete()
            except Exception as e:
                failure = e
                chief_error = f"{type(e).__name__}: {e}"
        if dist.size > 1:
            chief_error = dist.broadcast(chief_error)
        if failure is not None:
            raise failure
        if chief_error:
            raise RuntimeError(f"{where}: the chief could not complete sharded checkpoint "
                               f"{uuid}: {chief_error}")

    def _resolve(self, uuid: str, where: str) -> str:
        """Where checkpoint `uuid` is: its directory, or its ``s3://`` URL on object storage
        (which holds its objects; whether they are whole is for the fetch to say)."""
        if not isinstance(uuid, str) or not _UUID_CHARS.fullmatch(uuid) or uuid in (".", ".."):
            raise ValueError(f"{where}: {uuid!r} is not a checkpoint uuid")
        if self._latest and uuid == self._latest and self._restore_dir \
                and (is_s3_url(self._restore_dir) or os.path.isdir(self._restore_dir)):
            return self._restore_dir
        storage = self._storage_of(self._dir)
        if storage is not None:
            # One listing of the experiment's prefix finds this trial's and the other trials'.
            found = storage.find(self._dir, uuid)
            if found:
                return found
            raise FileNotFoundError(f"{where}: checkpoint {uuid} is not in {self._dir} nor in "
                                    f"another trial's prefix beside it")
        if self._dir:
            own = os.path.join(self._dir, uuid)
            if os.path.isdir(own):
                return own
            # Another trial of the same experiment: its directory is a sibling of ours.
            for other in sorted(glob.glob(os.path.join(glob.escape(os.path.dirname(self._dir)),
                                                       "*", uuid))):
                if os.path.isdir(other):
                    return other
        raise FileNotFoundError(f"{where}: checkpoint {uuid} is not in {self._dir or '(none)'} "
                                f"nor in another trial's directory beside it")

    @contextlib.contextmanager
    def restore_path(self, uuid: str) -> Iterator[str]:
        """Yields the directory of checkpoint `uuid` to read from (do not write into it):
        SF_RESTORE_CHECKPOINT for the trial's latest checkpoint, else this trial's or another
        trial's of the same experiment. On object storage, a verified local copy in a temporary
        directory, removed when the block ends (DamagedCheckpointError for a checkpoint that is
        not whole, StorageError when the storage fails)."""
        location = self._resolve(uuid, f"{self._label}: restore_path")
        storage = self._storage_of(location)
        if storage is None:
            yield location
            return
        scratch = tempfile.mkdtemp(prefix="sf-restore-")
        try:
            local = os.path.join(scratch, uuid)
            storage.fetch(location, local)
            yield local
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def get_metadata(self, uuid: str) -> dict[str, Any]:
        """The metadata stored with checkpoint `uuid` (its metadata.json; on object storage
        only that object is read, verified against the manifest)."""
        location = self._resolve(uuid, f"{self._label}: get_metadata")
        storage = self._storage_of(location)
        if storage is not None:
            return json.loads(storage.read_file(location, "metadata.json"))
        with open(os.path.join(location, "metadata.json"), encoding="utf-8") as f:
            return json.load(f)

    def upload(self, ckpt_dir: Optional[str], metadata: dict[str, Any], *, shard: bool = False,
               selector: Optional[Callable[[str], bool]] = None) -> str:
        """Stores the files of an existing directory as a new checkpoint and returns its uuid
        (Determined's upload): store_path() with the directory's files copied in, so the same
        rules hold — `metadata` must include "steps_completed"; without `shard` only the
        chief's call stores (other ranks get "" and may pass None); with ``shard=True`` every
        rank calls it with its own directory (or None) and all ranks get the uuid.
        `selector(relative path)` picks the files (default: all). A metadata.json among them
        is replaced by `metadata`. FileNotFoundError when `ckpt_dir` is not a directory."""
        where = f"{self._label}: upload"
        if ckpt_dir is not None and not os.path.isdir(ckpt_dir):
            raise FileNotFoundError(f"{where}: {ckpt_dir!r} is not a directory")
        with self.store_path(metadata, shard=shard) as (path, uuid):
            if ckpt_dir is not None and (uuid or shard):
                _copy_files(ckpt_dir, path, selector)
        return uuid

    def download(self, uuid: str, ckpt_dir: str, *,
                 selector: Optional[Callable[[str], bool]] = None) -> None:
        """Copies checkpoint `uuid`'s files into `ckpt_dir` (made if missing; files already
        there with the same names are replaced): Determined's download. `selector(relative
        path)` picks the files (default: all). FileNotFoundError naming a uuid it cannot find.
        On object storage only the picked objects are fetched, each verified against the
        manifest before any is moved into `ckpt_dir`.
        """
        source = self._resolve(uuid, f"{self._label}: download")
        os.makedirs(ckpt_dir, exist_ok=True)
        storage = self._storage_of(source)
        if storage is None:
            _copy_files(source, ckpt_dir, selector)
            return
        scratch = tempfile.mkdtemp(prefix=".sf-download-", dir=ckpt_dir)
        try:
            fetched = os.path.join(scratch, uuid)
            for f in storage.fetch(source, fetched, selector):
                destination = os.path.join(ckpt_dir, *f.path.split("/"))
                os.makedirs(os.path.dirname(destination), exist_ok=True)
                os.replace(os.path.join(fetched, *f.path.split("/")), destination)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def delete(self, uuid: str) -> None:
        """Deletes checkpoint `uuid` of this trial's experiment: its files and, on a cluster,
        its record (Determined's delete). Only the chief deletes; on other ranks the call is
        checked and ignored, so every rank can run the same code. On a cluster the master
        refuses (TrialLinkError) another experiment's checkpoint, one a trial would resume
        from, and one a model version names; in local mode the directory is removed.
        ValueError for what is not a uuid; FileNotFoundError for one that is not there."""
        where = f"{self._label}: delete"
        if not isinstance(uuid, str) or not _UUID_CHARS.fullmatch(uuid) or uuid in (".", ".."):
            raise ValueError(f"{where}: {uuid!r} is not a checkpoint uuid")
        if self._dist.rank != 0:
            return
        if not self._link.delete_checkpoint(uuid):
            location = self._resolve(uuid, where)
            storage = self._storage_of(location)
            if storage is None:
                shutil.rmtree(location)
            else:
                storage.remove(location)


def _copy_files(source: str, target: str, selector: Optional[Callable[[str], bool]]) -> None:
    for rel in _relative_files(source):
        if selector is not None and not selector(rel):
            continue
        destination = os.path.join(target, rel)
        os.makedirs(os.path.dirname(destination), exist_ok=True)
        shutil.copy2(os.path.join(source, rel), destination)
