"""Checkpoints on S3-compatible object storage (``checkpoint_storage: {type: s3}``): the Python
side of common/storage/checkpoint_storage.h, so that a checkpoint stored by a Core API script
and one stored by the native trainer are the same objects, read by the same code.

Contract (the C++ seam's, kept byte for byte):

- A checkpoint is the objects under ``<url>/`` where ``<url>`` is
  ``s3://<bucket>[/<prefix>]/experiment-<id>/trial-<id>/<uuid>``: one object per file, at
  ``<url>/<relative path>``.
- `store` uploads every file (PARALLEL_FILES at a time; a file above PART_BYTES as a multipart
  upload in parallel parts, by boto3's managed transfer) and then, **last**, the object manifest
  ``<url>/steadfast-manifest.json``: ``{"files":[{"path","sha256","size"}, ...],
  "format_version":1,"size":<total bytes>}``, files sorted by path, written as the C++
  ``Value::ToJson`` writes it (keys sorted, no spaces). A checkpoint without its manifest was
  never completed and is never restored.
- `fetch` reads the manifest first, downloads every file into ``<dir>.partial``, checks each
  file's size and SHA-256 against the manifest, then renames ``<dir>.partial`` to ``<dir>``; a
  failed fetch removes ``<dir>.partial``, so no directory that looks whole is left. The manifest
  itself is not written into ``<dir>``.
- `remove` deletes the manifest first (a half-deleted checkpoint never looks whole), then every
  object under ``<url>/``; removing one that is gone succeeds.
- Configuration (S3Settings): the experiment config's ``checkpoint_storage`` section when its
  type is s3; the endpoint is its endpoint_url, else $SF_S3_ENDPOINT, else
  ``https://s3.<region>.amazonaws.com``; the region its region, else $AWS_DEFAULT_REGION, else
  us-east-1; the keys its access_key/secret_key, else boto3's own lookup (AWS_ACCESS_KEY_ID /
  AWS_SECRET_ACCESS_KEY). Path-style addressing (``<endpoint>/<bucket>/<key>``), as the C++
  client, so any S3-compatible server works.

Errors: every failure of the storage raises StorageError, one line naming the operation, the
``s3://`` URL, the endpoint and the server's answer (its error code, e.g. NoSuchBucket,
AccessDenied, SignatureDoesNotMatch, and message with the HTTP status), or that the endpoint did
not answer; a checkpoint that is not whole raises DamagedCheckpointError (a StorageError).
Configuration errors raise ValueError naming the field and where it came from.

Thread-safety: an S3Storage holds its configuration and one boto3 client (which is
thread-safe); every method may be called from any thread.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

from ._link import CheckpointFile

__all__ = ["MANIFEST", "S3Settings", "S3Storage", "StorageError", "DamagedCheckpointError",
           "is_s3_url", "manifest_json", "open_storage"]

MANIFEST = "steadfast-manifest.json"
FORMAT_VERSION = 1
PARALLEL_FILES = 4  # files uploaded or downloaded at a time (the C++ kParallelFiles)
PART_BYTES = 16 << 20  # above this a file goes in parts of this size (the C++ part_bytes)
PARALLEL_PARTS = 4  # parts of one file in flight at a time
ATTEMPTS = 3  # per request, for no answer or a 5xx (botocore's "standard" retry mode)

_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


def is_s3_url(path: str) -> bool:
    return path.startswith("s3://")


class StorageError(RuntimeError):
    """The object storage could not do what was asked. `url` is the ``s3://`` URL concerned,
    `endpoint` the server's URL, `code` the server's error code (NoSuchBucket, NoSuchKey,
    AccessDenied, SignatureDoesNotMatch, ...; "Unavailable" when the endpoint did not answer,
    "NoCredentials" when there were no keys) and `status` the HTTP status (0 without one)."""

    def __init__(self, message: str, *, url: str = "", endpoint: str = "", code: str = "",
                 status: int = 0) -> None:
        super().__init__(message)
        self.url = url
        self.endpoint = endpoint
        self.code = code
        self.status = status


class DamagedCheckpointError(StorageError):
    """A checkpoint that is not whole: it has no manifest (its upload never completed), its
    manifest is malformed, or one of its objects does not match the manifest's size or SHA-256.
    Such a checkpoint is never restored."""


@dataclass(frozen=True)
class S3Settings:
    """Where the objects are and how to sign for them. Empty keys: boto3's own lookup."""

    endpoint_url: str
    region: str
    access_key: str = ""
    secret_key: str = ""

    @classmethod
    def from_config(cls, config_yaml: str, source: str) -> "S3Settings":
        """The settings of an experiment config's text (`source` names it in errors; an empty
        text means no config): its ``checkpoint_storage`` section when of type s3, with the
        fallbacks of the module's contract. Scalars are read as the C++ config reader reads
        them, as their text (``access_key: 0123`` is "0123"). ValueError for a config that is
        not YAML, an endpoint that is not http(s), or only one of the two keys."""
        import yaml  # Debian's python3-yaml

        section: dict[str, Any] = {}
        if config_yaml.strip():
            try:
                doc = yaml.load(config_yaml, Loader=yaml.BaseLoader)  # every scalar as a str
            except yaml.YAMLError as e:
                raise ValueError(f"steadfast: the experiment config {source} is not YAML: "
                                 f"{e}") from None
            found = doc.get("checkpoint_storage") if isinstance(doc, dict) else None
            if isinstance(found, dict) and found.get("type") == "s3":
                section = found

        def field(name: str) -> str:
            value = section.get(name, "")
            if not isinstance(value, str):
                raise ValueError(f"steadfast: checkpoint_storage.{name} in {source}: expected a "
                                 f"string, got {type(value).__name__}")
            return value

        region = field("region") or os.environ.get("AWS_DEFAULT_REGION", "") or "us-east-1"
        endpoint = field("endpoint_url")
        endpoint_from = f"checkpoint_storage.endpoint_url in {source}"
        if not endpoint:
            endpoint, endpoint_from = os.environ.get("SF_S3_ENDPOINT", ""), "$SF_S3_ENDPOINT"
        if not endpoint:
            endpoint, endpoint_from = f"https://s3.{region}.amazonaws.com", "the region"
        if not endpoint.startswith(("http://", "https://")):
            raise ValueError(f"steadfast: {endpoint_from}: {endpoint!r} must start with http:// "
                             f"or https://")
        access, secret = field("access_key"), field("secret_key")
        if bool(access) != bool(secret):
            raise ValueError(f"steadfast: checkpoint_storage in {source}: give access_key and "
                             f"secret_key together, or neither (then AWS_ACCESS_KEY_ID and "
                             f"AWS_SECRET_ACCESS_KEY are read from the environment)")
        return cls(endpoint.rstrip("/"), region, access, secret)


def open_storage(paths: Iterable[str], *, config_file: str = "", config_text: str = "",
                 config_source: str = "") -> Optional["S3Storage"]:
    """The storage for a trial whose checkpoint paths are `paths`: None when none of them is an
    ``s3://`` URL (nothing is read then), else an S3Storage configured from the experiment
    config: `config_text` (from `config_source`) when given, else the file `config_file` when
    given, else the environment alone. OSError naming the file it cannot read; ValueError for a
    bad config; ImportError when boto3 is missing."""
    if not any(is_s3_url(p) for p in paths):
        return None
    source = config_source or "the experiment config"
    if not config_text and config_file:
        source = config_file
        try:
            with open(config_file, encoding="utf-8") as f:
                config_text = f.read()
        except OSError as e:
            raise OSError(f"steadfast: the experiment config {config_file} (SF_CONFIG_FILE) "
                          f"cannot be read: {e.strerror or e}") from None
    return S3Storage(S3Settings.from_config(config_text, source))


def manifest_json(files: Iterable[CheckpointFile]) -> bytes:
    """The object manifest of `files`, byte for byte as the C++ Store writes it: keys sorted, no
    whitespace, UTF-8, files sorted by path."""
    ordered = sorted(files, key=lambda f: f.path.encode("utf-8"))
    doc = {"format_version": FORMAT_VERSION,
           "files": [{"path": f.path, "size": f.size, "sha256": f.sha256} for f in ordered],
           "size": sum(f.size for f in ordered)}
    return json.dumps(doc, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")


def _split_url(url: str) -> tuple[str, str]:
    """(bucket, key) of an ``s3://bucket/key`` URL, the key without a trailing '/'. ValueError
    for a URL that is not s3:// or whose bucket is not an S3 bucket name."""
    if not is_s3_url(url):
        raise ValueError(f"{url!r} is not an s3:// URL")
    bucket, _, key = url[len("s3://"):].partition("/")
    if not _BUCKET.fullmatch(bucket):
        raise ValueError(f"{url!r}: {bucket!r} is not an S3 bucket name (3-63 lower-case "
                         f"letters, digits, '.' and '-', starting and ending with a letter or "
                         f"digit)")
    return bucket, key.rstrip("/")


def _checkpoint_place(url: str) -> tuple[str, str]:
    bucket, key = _split_url(url)
    if not key:
        raise ValueError(f"{url!r} names a bucket, not a checkpoint")
    return bucket, key


def _safe_relative(path: str) -> bool:
    """A relative path inside a checkpoint: no root, no empty, "." or ".." parts."""
    return bool(path) and not path.startswith("/") and all(
        part not in ("", ".", "..") for part in path.split("/"))


def _parse_manifest(url: str, text: bytes) -> list[CheckpointFile]:
    where = f"checkpoint {url}: {MANIFEST}"
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    entries = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise DamagedCheckpointError(f"{where} is not a manifest (no file list)", url=url)
    out = []
    for e in entries:
        path = e.get("path") if isinstance(e, dict) else None
        size = e.get("size") if isinstance(e, dict) else None
        sha = e.get("sha256") if isinstance(e, dict) else None
        if not (isinstance(path, str) and _safe_relative(path) and isinstance(size, int)
                and not isinstance(size, bool) and isinstance(sha, str)):
            raise DamagedCheckpointError(f"malformed entry in {where}: {json.dumps(e)}", url=url)
        out.append(CheckpointFile(path, size, sha))
    return out


def _check_against(url: str, want: CheckpointFile, size: int, digest: Callable[[], str]) -> None:
    """DamagedCheckpointError unless a fetched file of `size` bytes and SHA-256 `digest()` is
    the one the manifest lists (an empty sha256 there is not checked, as in C++)."""
    if size != want.size:
        raise DamagedCheckpointError(f"checkpoint {url}: {want.path} has {size} bytes, the "
                                     f"manifest says {want.size}", url=url)
    if want.sha256 and (got := digest()) != want.sha256:
        raise DamagedCheckpointError(f"checkpoint {url}: {want.path} does not match its SHA-256 "
                                     f"({got[:12]}... instead of {want.sha256[:12]}...)", url=url)


def _file_sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _parallel(tasks: list[Callable[[], None]]) -> None:
    """Runs `tasks` on up to PARALLEL_FILES threads; the first error is raised once every task
    already started has ended, and no task starts after it."""
    if not tasks:
        return
    with ThreadPoolExecutor(max_workers=min(PARALLEL_FILES, len(tasks)),
                            thread_name_prefix="sf-s3") as pool:
        futures = [pool.submit(t) for t in tasks]
        for done in as_completed(futures):
            error = done.exception()
            if error is not None:
                for f in futures:
                    f.cancel()
                raise error


class S3Storage:
    """Checkpoints under ``s3://`` URLs, configured by `settings` (the bucket is each URL's
    own); see the module docstring for the contract and errors. ImportError naming the package
    when boto3 is not installed; ValueError for settings botocore refuses (a bad region)."""

    def __init__(self, settings: S3Settings) -> None:
        try:
            import boto3
            import boto3.s3.transfer
            import botocore.config
            import botocore.exceptions
        except ImportError as e:
            raise ImportError(f"steadfast: checkpoints on S3 need boto3: apt-get install "
                              f"python3-boto3 ({e})") from e
        self.settings = settings
        keys: dict[str, str] = {}
        if settings.access_key:
            keys = {"aws_access_key_id": settings.access_key,
                    "aws_secret_access_key": settings.secret_key}
        config = botocore.config.Config(
            s3={"addressing_style": "path"}, signature_version="s3v4",
            retries={"max_attempts": ATTEMPTS, "mode": "standard"},
            connect_timeout=10, read_timeout=120,
            max_pool_connections=PARALLEL_FILES * PARALLEL_PARTS + 1)
        try:
            self._client = boto3.session.Session().client(
                "s3", endpoint_url=settings.endpoint_url, region_name=settings.region,
                config=config, **keys)
        except botocore.exceptions.BotoCoreError as e:  # e.g. a region name of the wrong form
            raise ValueError(f"steadfast: checkpoint_storage at {settings.endpoint_url}: {e}") \
                from None
        self._transfer = boto3.s3.transfer.TransferConfig(
            multipart_threshold=PART_BYTES, multipart_chunksize=PART_BYTES,
            max_concurrency=PARALLEL_PARTS, use_threads=True)

    # ---- writing

    def store(self, local_dir: str, url: str, files: list[CheckpointFile]) -> None:
        """Stores `files` (relative to `local_dir`, as list_files gives them) as the checkpoint
        at `url`: every file, then the manifest. The checkpoint exists once this returns."""
        self.upload_files(local_dir, url, files)
        self.write_manifest(url, files)

    def upload_files(self, local_dir: str, url: str, files: list[CheckpointFile]) -> None:
        """Uploads `files` under `url` without a manifest: a part of a sharded checkpoint,
        which write_manifest completes. OSError for a local file that cannot be read."""
        bucket, key = _checkpoint_place(url)

        def upload(f: CheckpointFile) -> Callable[[], None]:
            local = os.path.join(local_dir, *f.path.split("/"))
            return lambda: self._call("uploading", bucket, f"{key}/{f.path}",
                                      lambda: self._client.upload_file(
                                          local, bucket, f"{key}/{f.path}",
                                          Config=self._transfer))

        _parallel([upload(f) for f in files])

    def write_manifest(self, url: str, files: list[CheckpointFile]) -> None:
        """Writes the manifest of `files` at `url`: the last object of a checkpoint."""
        bucket, key = _checkpoint_place(url)
        body = manifest_json(files)
        self._call("writing", bucket, f"{key}/{MANIFEST}", lambda: self._client.put_object(
            Bucket=bucket, Key=f"{key}/{MANIFEST}", Body=body, ContentType="application/json"))

    # ---- reading

    def read_manifest(self, url: str) -> list[CheckpointFile]:
        """The files of the checkpoint at `url`, from its manifest. DamagedCheckpointError when
        it has none ("... its upload never completed") or it is malformed."""
        bucket, key = _checkpoint_place(url)
        try:
            body = self._get(bucket, f"{key}/{MANIFEST}")
        except StorageError as e:
            if e.code != "NoSuchKey":
                raise
            raise DamagedCheckpointError(f"checkpoint {url} has no {MANIFEST}: its upload never "
                                         f"completed", url=url, endpoint=e.endpoint,
                                         code=e.code, status=e.status) from None
        return _parse_manifest(url, body)

    def fetch(self, url: str, local_dir: str,
              selector: Optional[Callable[[str], bool]] = None) -> list[CheckpointFile]:
        """Copies the checkpoint at `url` (the files `selector(path)` picks; default all) into
        `local_dir`, which must not exist, verified; returns the files copied.
        FileExistsError when `local_dir` exists."""
        files = self.read_manifest(url)
        bucket, key = _checkpoint_place(url)
        if os.path.lexists(local_dir):
            raise FileExistsError(f"fetching checkpoint {url}: {local_dir} already exists")
        partial = local_dir + ".partial"
        shutil.rmtree(partial, ignore_errors=True)
        chosen = [f for f in files if selector is None or selector(f.path)]

        def download(f: CheckpointFile) -> Callable[[], None]:
            def run() -> None:
                to = os.path.join(partial, *f.path.split("/"))
                os.makedirs(os.path.dirname(to), exist_ok=True)
                self._call("downloading", bucket, f"{key}/{f.path}",
                           lambda: self._client.download_file(bucket, f"{key}/{f.path}", to,
                                                              Config=self._transfer))
                _check_against(url, f, os.path.getsize(to), lambda: _file_sha256(to))
            return run

        try:
            os.makedirs(partial)
            _parallel([download(f) for f in chosen])
            os.rename(partial, local_dir)
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
        return chosen

    def read_file(self, url: str, path: str) -> bytes:
        """The bytes of file `path` of the checkpoint at `url`, verified against the manifest.
        FileNotFoundError when the manifest lists no such file."""
        wanted = [f for f in self.read_manifest(url) if f.path == path]
        if not wanted:
            raise FileNotFoundError(f"checkpoint {url} has no file {path!r}")
        bucket, key = _checkpoint_place(url)
        data = self._get(bucket, f"{key}/{path}")
        _check_against(url, wanted[0], len(data), lambda: hashlib.sha256(data).hexdigest())
        return data

    def find(self, trial_url: str, uuid: str) -> Optional[str]:
        """The URL of checkpoint `uuid` of the experiment whose trial stores under `trial_url`
        (``.../experiment-<id>/trial-<id>``): the ``<trial>/<uuid>`` beside it that holds a
        manifest, else one that holds objects but no manifest (fetching it then says it never
        completed), else None. One listing of the experiment's prefix."""
        bucket, key = _split_url(trial_url)
        parent = key.rpartition("/")[0]
        prefix = f"{parent}/" if parent else ""

        def scan() -> Optional[str]:
            incomplete: Optional[str] = None
            for page in self._client.get_paginator("list_objects_v2").paginate(Bucket=bucket,
                                                                               Prefix=prefix):
                for obj in page.get("Contents", []):
                    parts = obj["Key"][len(prefix):].split("/")
                    if len(parts) < 3 or parts[1] != uuid:
                        continue
                    url = f"s3://{bucket}/{prefix}{parts[0]}/{uuid}"
                    if len(parts) == 3 and parts[2] == MANIFEST:
                        return url
                    incomplete = incomplete or url
            return incomplete

        return self._call("listing", bucket, prefix, scan)

    # ---- removing

    def remove(self, url: str) -> None:
        """Deletes the checkpoint at `url`: the manifest first, then every object under it."""
        bucket, key = _checkpoint_place(url)
        self._call("deleting", bucket, f"{key}/{MANIFEST}", lambda: self._client.delete_object(
            Bucket=bucket, Key=f"{key}/{MANIFEST}"))
        listed = self._call("listing", bucket, f"{key}/", lambda: [
            obj["Key"] for page in self._client.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=f"{key}/") for obj in page.get("Contents", [])])

        def delete(k: str) -> Callable[[], None]:
            return lambda: self._call("deleting", bucket, k,
                                      lambda: self._client.delete_object(Bucket=bucket, Key=k))

        _parallel([delete(k) for k in listed])

    def _get(self, bucket: str, key: str) -> bytes:
        return self._call("reading", bucket, key, lambda: self._client.get_object(
            Bucket=bucket, Key=key)["Body"].read())

    # ---- errors

    def _call(self, what: str, bucket: str, key: str, fn: Callable[[], Any]) -> Any:
        """fn(), with boto3's and botocore's errors turned into one StorageError line."""
        import boto3.exceptions
        import botocore.exceptions

        try:
            return fn()
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError,
                boto3.exceptions.Boto3Error) as e:
            raise self._error(what, bucket, key, e) from None

    def _error(self, what: str, bucket: str, key: str, error: BaseException) -> StorageError:
        import boto3.exceptions
        import botocore.exceptions as bce

        url = f"s3://{bucket}" + (f"/{key}" if key else "")
        endpoint = self.settings.endpoint_url
        # boto3's managed transfer wraps the request's error: S3UploadFailedError is raised while
        # handling it, RetriesExceededError keeps it.
        if isinstance(error, boto3.exceptions.S3UploadFailedError) and error.__context__:
            error = error.__context__
        if isinstance(error, boto3.exceptions.RetriesExceededError) and error.last_exception:
            error = error.last_exception
        if isinstance(error, bce.ClientError):
            answer = error.response.get("Error", {})
            status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
            code, message = str(answer.get("Code") or ""), str(answer.get("Message") or "")
            if not code or code.isdigit():  # a HEAD has no body: say what its status means
                code = ({404: "NoSuchKey" if key else "NoSuchBucket", 403: "AccessDenied"}
                        .get(status, f"HTTP {status}"))
            line = f"{what} {url} at {endpoint}: {code}"
            if message:
                line += f": {message}"
            line += f" (HTTP {status})"
            if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch"):
                line += "; check the access key and secret key"
            return StorageError(line, url=url, endpoint=endpoint, code=code, status=status)
        if isinstance(error, (bce.NoCredentialsError, bce.PartialCredentialsError)):
            return StorageError(
                f"{what} {url} at {endpoint}: no credentials: the experiment's "
                f"checkpoint_storage has no access_key/secret_key and AWS_ACCESS_KEY_ID / "
                f"AWS_SECRET_ACCESS_KEY are not set", url=url, endpoint=endpoint,
                code="NoCredentials")
        if isinstance(error, (bce.ConnectionError, bce.HTTPClientError)):
            return StorageError(f"{what} {url}: the endpoint {endpoint} did not answer ({error})",
                                url=url, endpoint=endpoint, code="Unavailable")
        return StorageError(f"{what} {url} at {endpoint}: {type(error).__name__}: {error}",
                            url=url, endpoint=endpoint, code=type(error).__name__)
