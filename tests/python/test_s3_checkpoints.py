"""Core API checkpoints on object storage (checkpoint_storage type s3) against a real S3 server:
tests/storage/s3_test.sh brings up deploy/local-s3.sh (Ceph's RADOS Gateway) and exports
SF_S3_ENDPOINT, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION and SF_S3_BUCKET.
Every test skips without SF_S3_ENDPOINT. The scripts run as separate processes with the
environment the agent gives a task, against a real TrialLink server on loopback, and what they
leave in the bucket is read back with a client of the test's own."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import textwrap
import unittest
import uuid as uuidlib
from typing import Any, Optional

from trial_link_server import TrialLinkServer, clean_env, out_line, run_ranks, run_script

ENDPOINT = os.environ.get("SF_S3_ENDPOINT", "")
BUCKET = os.environ.get("SF_S3_BUCKET", "sf-test")
MANIFEST = "steadfast-manifest.json"
BIG = 17 << 20  # above the 16 MiB part size: a multipart upload


def s3_client() -> Any:
    import boto3
    import botocore.config

    return boto3.session.Session().client(
        "s3", endpoint_url=ENDPOINT, region_name=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
        config=botocore.config.Config(s3={"addressing_style": "path"}))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@unittest.skipUnless(ENDPOINT, "needs a real S3 server: run through tests/storage/s3_test.sh")
class S3CheckpointTest(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="sf-s3-core-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.s3 = s3_client()
        self.addCleanup(self.s3.close)
        # Each test under a prefix of its own, as an experiment with `prefix: <it>` would be.
        self.prefix = f"core-api-{uuidlib.uuid4().hex[:10]}"
        self.addCleanup(self.delete_prefix)
        self.experiment = f"s3://{BUCKET}/{self.prefix}/experiment-3"
        self.trial_dir = f"{self.experiment}/trial-7"
        self.tmp = os.path.join(self.dir, "tmp")  # the scripts' TMPDIR: staging must not stay
        os.makedirs(self.tmp)
        self.config = self.write_config()

    def delete_prefix(self) -> None:
        for key in self.keys(""):
            self.s3.delete_object(Bucket=BUCKET, Key=key)

    def keys(self, under: str) -> list[str]:
        """Every key under `<prefix>/<under>`, sorted."""
        out = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(
                Bucket=BUCKET, Prefix=f"{self.prefix}/{under}"):
            out += [o["Key"] for o in page.get("Contents", [])]
        return sorted(out)

    def get(self, url: str) -> bytes:
        key = url[len(f"s3://{BUCKET}/"):]
        return self.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()

    def put(self, url: str, data: bytes) -> None:
        self.s3.put_object(Bucket=BUCKET, Key=url[len(f"s3://{BUCKET}/"):], Body=data)

    def write_config(self, **storage: str) -> str:
        """The experiment's YAML (SF_CONFIG_FILE) with a checkpoint_storage of type s3 and
        `storage`'s fields; endpoint and keys from the environment unless given."""
        fields = "".join(f"  {k}: {json.dumps(v)}\n" for k, v in storage.items())
        path = os.path.join(self.dir, f"experiment-{uuidlib.uuid4().hex[:6]}.yaml")
        with open(path, "w") as f:
            f.write(f"name: core-api-s3\nentrypoint: python3 train.py\n"
                    f"searcher: {{name: single, metric: loss, max_length: {{batches: 4}}}}\n"
                    f"checkpoint_storage:\n  type: s3\n  bucket: {BUCKET}\n"
                    f"  prefix: {self.prefix}\n{fields}")
        return path

    def serve(self, operations: Optional[list[tuple[int, str]]] = None) -> TrialLinkServer:
        server = TrialLinkServer(operations)
        self.addCleanup(server.close)
        return server

    def task_env(self, server: TrialLinkServer, rank: int = 0, world_size: int = 1,
                 trial: int = 7, **extra: str) -> dict[str, str]:
        env = clean_env(
            SF_MASTER_ADDRESS=server.address, SF_TASK_TOKEN=f"token-{trial}",
            SF_TRIAL_ID=str(trial), SF_EXPERIMENT_ID="3", SF_TASK_ID=f"task-{trial}-0",
            SF_RESTART="0", SF_RANK=str(rank), SF_WORLD_SIZE=str(world_size),
            SF_LOCAL_RANK=str(rank), SF_LOCAL_SIZE=str(world_size), SF_HPARAMS="{}",
            SF_CHECKPOINT_DIR=f"{self.experiment}/trial-{trial}", SF_CONFIG_FILE=self.config,
            SF_SLOT_IDS="cpu0", SF_RENDEZVOUS_TIMEOUT_S="60", SF_S3_ENDPOINT=ENDPOINT,
            TMPDIR=self.tmp)
        env.update(extra)
        return env

    def script(self, body: str) -> str:
        path = os.path.join(self.dir, f"train-{uuidlib.uuid4().hex[:6]}.py")
        with open(path, "w") as f:
            f.write(textwrap.dedent(body))
        return path

    def run_out(self, path: str, env: dict[str, str]) -> dict[str, Any]:
        """Runs the script; it must exit 0 and print one "OUT <json>" line, returned."""
        p = run_script(path, env, self.dir, timeout=180)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return json.loads(p.stdout.split("OUT ", 1)[1].splitlines()[0])

    def run_ranks(self, path: str, envs: list[dict[str, str]]) -> list:
        """Every rank at once; each must exit 0 and print one "OUT <json>" line: by rank."""
        return [out_line(self, r) for r in run_ranks(path, envs, self.dir)]

    STORE = """
        import json, os, steadfast
        with steadfast.core.init() as ctx:
            with ctx.checkpoint.store_path({"steps_completed": 4, "note": "s3"}) as (p, uuid):
                staging = p
                with open(os.path.join(p, "weights.bin"), "wb") as f:
                    f.write(bytes(range(256)) * 4)
                os.makedirs(os.path.join(p, "optimizer"))
                with open(os.path.join(p, "optimizer", "state.bin"), "wb") as f:
                    f.write(os.urandom(int(os.environ.get("BIG_BYTES", "1000"))))
            print("OUT", json.dumps({"uuid": uuid, "staging": staging,
                                     "staging_left": os.path.exists(staging),
                                     "directory": ctx.checkpoint.directory}))
        """

    def store(self, server: TrialLinkServer, **extra: str) -> dict[str, Any]:
        return self.run_out(self.script(self.STORE), self.task_env(server, **extra))

    def test_store_path_uploads_every_file_then_the_manifest_and_reports_the_url(self) -> None:
        server = self.serve()
        out = self.store(server, BIG_BYTES=str(BIG))
        uuid = out["uuid"]
        url = f"{self.trial_dir}/{uuid}"
        self.assertEqual(out["directory"], self.trial_dir)
        # Written in a local staging directory under the task's TMPDIR, removed afterwards.
        self.assertTrue(out["staging"].startswith(self.tmp + os.sep), out["staging"])
        self.assertFalse(out["staging_left"])
        self.assertEqual(os.listdir(self.tmp), [])

        prefix = f"{self.prefix}/experiment-3/trial-7/{uuid}"
        self.assertEqual(self.keys(""), [f"{prefix}/metadata.json", f"{prefix}/optimizer/state.bin",
                                         f"{prefix}/{MANIFEST}", f"{prefix}/weights.bin"])
        reported = [r.checkpoint for r in server.requests("ReportCheckpoint")]
        self.assertEqual(len(reported), 1)
        c = reported[0]
        self.assertEqual((c.uuid, c.path, c.batches), (uuid, url, 4))
        self.assertEqual(c.metadata["note"], "s3")
        files = {f.path: (f.size, f.sha256) for f in c.files}
        self.assertEqual(sorted(files), ["metadata.json", "optimizer/state.bin", "weights.bin"])
        for name, (size, digest) in files.items():
            data = self.get(f"{url}/{name}")
            self.assertEqual((size, digest), (len(data), sha256(data)), name)
        self.assertEqual(files["optimizer/state.bin"][0], BIG)
        self.assertEqual(json.loads(self.get(f"{url}/metadata.json")),
                         {"steps_completed": 4, "note": "s3"})
        self.assertEqual(c.size, sum(size for size, _ in files.values()))

        # The manifest has exactly the C++ shape (common/storage/checkpoint_storage.cc): keys
        # sorted, no whitespace, files sorted by path, so either side reads the other's.
        text = self.get(f"{url}/{MANIFEST}")
        manifest = json.loads(text)
        self.assertEqual(set(manifest), {"format_version", "files", "size"})
        self.assertEqual(manifest["format_version"], 1)
        self.assertEqual([f["path"] for f in manifest["files"]],
                         ["metadata.json", "optimizer/state.bin", "weights.bin"])
        for entry in manifest["files"]:
            self.assertEqual(set(entry), {"path", "size", "sha256"})
            self.assertEqual((entry["size"], entry["sha256"]), files[entry["path"]])
        self.assertEqual(manifest["size"], c.size)
        as_cpp_writes_it = ('{"files":[' + ",".join(
            '{"path":"%s","sha256":"%s","size":%d}' % (f.path, f.sha256, f.size)
            for f in sorted(c.files, key=lambda f: f.path)) +
            '],"format_version":1,"size":%d}' % c.size)
        self.assertEqual(text.decode(), as_cpp_writes_it)

    def test_restore_path_get_metadata_and_download_give_back_the_same_bytes(self) -> None:
        server = self.serve()
        own = self.store(server)["uuid"]
        sibling = self.store(server, SF_TRIAL_ID="6",
                             SF_CHECKPOINT_DIR=f"{self.experiment}/trial-6")["uuid"]
        reported = {r.checkpoint.uuid: {f.path: f.sha256 for f in r.checkpoint.files}
                    for r in server.requests("ReportCheckpoint")}
        path = self.script("""
            import hashlib, json, os, steadfast
            def digests(root):
                out = {}
                for d, _, names in os.walk(root):
                    for n in names:
                        full = os.path.join(d, n)
                        rel = os.path.relpath(full, root).replace(os.sep, "/")
                        out[rel] = hashlib.sha256(open(full, "rb").read()).hexdigest()
                return out
            with steadfast.core.init() as ctx:
                out = {"latest_uuid": ctx.info.latest_checkpoint}
                for name, u in [("latest", ctx.info.latest_checkpoint),
                                ("sibling", os.environ["SIBLING"])]:
                    with ctx.checkpoint.restore_path(u) as p:
                        out[name] = {"dir": p, "files": digests(p)}
                    out[name]["left"] = os.path.exists(p)
                out["meta"] = ctx.checkpoint.get_metadata(os.environ["SIBLING"])
                target = os.path.join(os.environ["TMPDIR"], "..", "downloaded")
                ctx.checkpoint.download(ctx.info.latest_checkpoint, target,
                                        selector=lambda rel: rel.startswith("optimizer/"))
                out["download"] = digests(target)
                try:
                    with ctx.checkpoint.restore_path("no-such-uuid"):
                        pass
                except FileNotFoundError as e:
                    out["missing"] = str(e)
                print("OUT", json.dumps(out))
            """)
        env = self.task_env(server, SF_LATEST_CHECKPOINT=own,
                            SF_RESTORE_CHECKPOINT=f"{self.trial_dir}/{own}", SIBLING=sibling)
        out = self.run_out(path, env)
        self.assertEqual(out["latest_uuid"], own)
        self.assertEqual(out["latest"]["files"], reported[own])
        self.assertEqual(out["sibling"]["files"], reported[sibling])
        for name in ("latest", "sibling"):
            self.assertTrue(out[name]["dir"].startswith(self.tmp + os.sep), out[name]["dir"])
            self.assertFalse(out[name]["left"], name)  # the local copy goes with the block
        self.assertEqual(out["meta"], {"steps_completed": 4, "note": "s3"})
        self.assertEqual(out["download"],
                         {"optimizer/state.bin": reported[own]["optimizer/state.bin"]})
        self.assertIn(f"checkpoint no-such-uuid is not in {self.trial_dir}", out["missing"])
        self.assertEqual(os.listdir(self.tmp), [])

    def test_a_checkpoint_whose_manifest_is_gone_never_completed_and_is_refused(self) -> None:
        server = self.serve()
        uuid = self.store(server)["uuid"]
        url = f"{self.trial_dir}/{uuid}"
        self.s3.delete_object(Bucket=BUCKET, Key=f"{url[len(f's3://{BUCKET}/'):]}/{MANIFEST}")
        out = self.run_out(self.script(self.REFUSED), self.task_env(
            server, SF_LATEST_CHECKPOINT=uuid, SF_RESTORE_CHECKPOINT=url, UUID=uuid))
        never = f"checkpoint {url} has no {MANIFEST}: its upload never completed"
        # As the latest (SF_RESTORE_CHECKPOINT) and found by its uuid among the trial's objects.
        for how in ("restore_path", "get_metadata", "download"):
            self.assertEqual(out[how], ["DamagedCheckpointError", never], how)
        self.assertEqual(out["by_uuid"], ["DamagedCheckpointError", never])
        self.assertEqual(out["left"], ["target"])  # no staging copy, no .partial
        self.assertEqual(out["target"], [])

    REFUSED = """
        import json, os, steadfast
        def attempt(fn):
            try:
                fn()
            except Exception as e:
                return [type(e).__name__, str(e)]
            return None
        def restore(u):
            with ctx.checkpoint.restore_path(u):
                raise AssertionError("restored")
        with steadfast.core.init() as ctx:
            u = os.environ["UUID"]
            target = os.path.join(os.environ["TMPDIR"], "target")
            out = {"restore_path": attempt(lambda: restore(u)),
                   "get_metadata": attempt(lambda: ctx.checkpoint.get_metadata(u)),
                   "download": attempt(lambda: ctx.checkpoint.download(u, target))}
            ctx.checkpoint._latest = None  # look it up by uuid, as for a checkpoint not the latest
            out["by_uuid"] = attempt(lambda: restore(u))
            out["left"] = sorted(os.listdir(os.environ["TMPDIR"]))
            out["target"] = sorted(os.listdir(target)) if os.path.isdir(target) else None
            print("OUT", json.dumps(out))
        """

    def test_an_object_that_does_not_match_the_manifest_is_refused(self) -> None:
        server = self.serve()
        uuid = self.store(server)["uuid"]
        url = f"{self.trial_dir}/{uuid}"
        weights = self.get(f"{url}/weights.bin")
        env = self.task_env(server, SF_LATEST_CHECKPOINT=uuid, SF_RESTORE_CHECKPOINT=url,
                            UUID=uuid)
        # Same size, other bytes: the SHA-256 says so. get_metadata reads only metadata.json,
        # which is intact.
        self.put(f"{url}/weights.bin", bytes(reversed(weights)))
        out = self.run_out(self.script(self.REFUSED), env)
        want = sha256(weights)[:12]
        got = sha256(bytes(reversed(weights)))[:12]
        sha_error = (f"checkpoint {url}: weights.bin does not match its SHA-256 ({got}... "
                     f"instead of {want}...)")
        self.assertEqual(out["restore_path"], ["DamagedCheckpointError", sha_error])
        self.assertEqual(out["download"], ["DamagedCheckpointError", sha_error])
        self.assertEqual(out["target"], [])  # nothing moved into the target
        self.assertIsNone(out["get_metadata"])
        self.assertEqual(out["left"], ["target"])  # no staging copy, no .partial
        # A shorter object: its size says so.
        self.put(f"{url}/weights.bin", weights[:100])
        out = self.run_out(self.script(self.REFUSED), env)
        self.assertEqual(out["restore_path"], [
            "DamagedCheckpointError",
            f"checkpoint {url}: weights.bin has 100 bytes, the manifest says {len(weights)}"])
        # A replaced metadata.json: get_metadata checks it against the manifest too.
        self.put(f"{url}/weights.bin", weights)
        self.put(f"{url}/metadata.json", b'{"steps_completed": 999}')
        out = self.run_out(self.script(self.REFUSED), env)
        self.assertEqual(out["get_metadata"][0], "DamagedCheckpointError")
        self.assertIn(f"checkpoint {url}: metadata.json has 24 bytes, the manifest says",
                      out["get_metadata"][1])

    def test_an_exception_in_the_block_uploads_and_reports_nothing(self) -> None:
        server = self.serve()
        path = self.script("""
            import json, os, steadfast
            with steadfast.core.init() as ctx:
                try:
                    with ctx.checkpoint.store_path({"steps_completed": 1}) as (p, uuid):
                        open(os.path.join(p, "w.bin"), "wb").write(b"x")
                        raise KeyError("boom")
                except KeyError:
                    pass
                print("OUT", json.dumps({"left": os.listdir(os.environ["TMPDIR"])}))
            """)
        self.assertEqual(self.run_out(path, self.task_env(server)), {"left": []})
        self.assertEqual(self.keys(""), [])
        self.assertEqual(server.requests("ReportCheckpoint"), [])

    def test_two_ranks_store_one_sharded_checkpoint(self) -> None:
        server = self.serve()
        path = self.script("""
            import json, os, steadfast
            with steadfast.core.init() as ctx:
                d = ctx.distributed
                out = {}
                with ctx.checkpoint.store_path({"steps_completed": 4}, shard=True) as (p, uuid):
                    os.makedirs(os.path.join(p, "rank%d" % d.rank))
                    with open(os.path.join(p, "rank%d" % d.rank, "shard.bin"), "w") as f:
                        f.write("rank %d" % d.rank)
                out["uuid"] = uuid
                try:
                    with ctx.checkpoint.store_path({"steps_completed": 4}, shard=True) as (p, u):
                        open(os.path.join(p, "same.bin"), "w").write("x")
                except RuntimeError as e:
                    out["conflict"] = [u, str(e)]
                with ctx.checkpoint.store_path({"steps_completed": 4}) as (p, u):
                    open(os.path.join(p, "plain.bin"), "w").write("rank %d" % d.rank)
                out["plain"] = u
                out["left"] = os.listdir(os.environ["TMPDIR"])
                print("OUT", json.dumps(out))
            """)
        envs = []
        for r in range(2):  # a TMPDIR each, as ranks on different machines have
            tmp = os.path.join(self.tmp, f"rank{r}")
            os.makedirs(tmp)
            envs.append(self.task_env(server, r, 2, TMPDIR=tmp))
        r0, r1 = self.run_ranks(path, envs)
        uuid = r0["uuid"]
        self.assertEqual(r1["uuid"], uuid)
        self.assertEqual((r0["left"], r1["left"]), ([], []))
        for o in (r0, r1):
            self.assertIn("ranks 0 and 1 both wrote 'same.bin'", o["conflict"][1])
        conflicted = r0["conflict"][0]
        self.assertEqual(r1["plain"], "")
        stored = {r.checkpoint.uuid: r.checkpoint for r in server.requests("ReportCheckpoint")}
        self.assertEqual(sorted(stored), sorted([uuid, r0["plain"]]))  # not the conflicting one
        self.assertEqual(self.keys(f"experiment-3/trial-7/{conflicted}"), [])
        c = stored[uuid]
        url = f"{self.trial_dir}/{uuid}"
        self.assertEqual(c.path, url)
        manifest = json.loads(self.get(f"{url}/{MANIFEST}"))
        self.assertEqual([f["path"] for f in manifest["files"]],
                         ["metadata.json", "rank0/shard.bin", "rank1/shard.bin"])
        self.assertEqual([(f.path, f.size, f.sha256) for f in c.files],
                         [(f["path"], f["size"], f["sha256"]) for f in manifest["files"]])
        for r in (0, 1):
            self.assertEqual(self.get(f"{url}/rank{r}/shard.bin"), b"rank %d" % r)
        self.assertEqual(json.loads(self.get(f"{url}/metadata.json")), {"steps_completed": 4})
        plain = f"{self.prefix}/experiment-3/trial-7/{r0['plain']}"
        self.assertEqual(self.keys(f"experiment-3/trial-7/{r0['plain']}"),
                         [f"{plain}/metadata.json", f"{plain}/plain.bin", f"{plain}/{MANIFEST}"])
        self.assertEqual(self.get(f"s3://{BUCKET}/{plain}/plain.bin"), b"rank 0")

    FAILS = """
        import json, os, steadfast
        from steadfast.core._s3_storage import StorageError
        with steadfast.core.init() as ctx:
            try:
                with ctx.checkpoint.store_path({"steps_completed": 1}) as (p, uuid):
                    open(os.path.join(p, "w.bin"), "wb").write(b"x")
                out = {"stored": uuid}
            except StorageError as e:
                out = {"type": type(e).__name__, "error": str(e), "code": e.code,
                       "chained": e.__cause__ is not None or not e.__suppress_context__}
            print("OUT", json.dumps(out))
        """

    def test_wrong_keys_a_missing_bucket_and_a_dead_endpoint_give_a_clear_error(self) -> None:
        server = self.serve()
        script = self.script(self.FAILS)
        cases = [
            ("wrong secret", {"SF_CONFIG_FILE": self.write_config(
                access_key=os.environ["AWS_ACCESS_KEY_ID"], secret_key="not-the-secret")},
             "SignatureDoesNotMatch",
             f"at {ENDPOINT}: SignatureDoesNotMatch", "; check the access key and secret key"),
            ("unknown key", {"AWS_ACCESS_KEY_ID": "NOSUCHKEY0000000000"}, "InvalidAccessKeyId",
             f"at {ENDPOINT}: InvalidAccessKeyId", "; check the access key and secret key"),
            ("missing bucket",
             {"SF_CHECKPOINT_DIR": "s3://no-such-bucket-here/experiment-3/trial-7"},
             "NoSuchBucket", "uploading s3://no-such-bucket-here/experiment-3/trial-7/",
             f"at {ENDPOINT}: NoSuchBucket"),
            ("dead endpoint", {"SF_CONFIG_FILE": self.write_config(
                endpoint_url="http://127.0.0.1:1")},
             "Unavailable", "the endpoint http://127.0.0.1:1 did not answer", ""),
        ]
        for name, extra, code, *parts in cases:
            with self.subTest(name):
                out = self.run_out(script, self.task_env(server, **extra))
                self.assertEqual(out.get("type"), "StorageError", out)
                self.assertEqual(out["code"], code)
                for part in parts:
                    self.assertIn(part, out["error"])
                self.assertNotIn("None", out["error"])
                self.assertFalse(out["chained"])  # one line, no botocore traceback behind it
                self.assertEqual(os.listdir(self.tmp), [])
        self.assertEqual(server.requests("ReportCheckpoint"), [])
        self.assertEqual(self.keys(""), [])

    def test_the_experiment_config_wins_over_the_environment(self) -> None:
        # checkpoint_storage's endpoint_url and keys are used, not SF_S3_ENDPOINT and AWS_*.
        server = self.serve()
        config = self.write_config(endpoint_url=ENDPOINT,
                                   access_key=os.environ["AWS_ACCESS_KEY_ID"],
                                   secret_key=os.environ["AWS_SECRET_ACCESS_KEY"])
        out = self.run_out(self.script(self.FAILS), self.task_env(
            server, SF_CONFIG_FILE=config, SF_S3_ENDPOINT="http://127.0.0.1:1",
            AWS_ACCESS_KEY_ID="NOSUCHKEY0000000000", AWS_SECRET_ACCESS_KEY="wrong"))
        self.assertIn("stored", out)
        self.assertEqual(len(server.requests("ReportCheckpoint")), 1)


if __name__ == "__main__":
    unittest.main()
