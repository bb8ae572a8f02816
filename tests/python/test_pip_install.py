"""`pip install` of the package from the tree, without network (docs/core-api.md, "Installing
the package"): the build step generates the TrialLink stubs with protoc, and the installed copy
imports and reports its version."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


class PipInstall(unittest.TestCase):
    def test_installs_offline_with_generated_stubs(self):
        with tempfile.TemporaryDirectory() as tmp:
            # A copy of the tree's python/ and proto/: pip builds in the source directory.
            shutil.copytree(os.path.join(REPO, "python"), os.path.join(tmp, "python"),
                            ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
            shutil.copytree(os.path.join(REPO, "proto"), os.path.join(tmp, "proto"))
            site = os.path.join(tmp, "site")
            env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
            env.pop("PYTHONPATH", None)
            built = subprocess.run(
                [sys.executable, "-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-index",
                 "--no-deps", "--target", site, os.path.join(tmp, "python")],
                env=env, capture_output=True, text=True, timeout=240)
            self.assertEqual(built.returncode, 0, built.stdout + built.stderr)
            self.assertTrue(os.path.isfile(os.path.join(site, "steadfast", "v1", "trial_link_pb2_grpc.py")))
            ran = subprocess.run(
                [sys.executable, "-c",
                 "import steadfast, steadfast.core, steadfast.v1.trial_link_pb2_grpc as g; "
                 "print(steadfast.__version__, steadfast.__file__, hasattr(g, 'TrialLinkStub'))"],
                env=dict(env, PYTHONPATH=site), capture_output=True, text=True, timeout=60, cwd=tmp)
            self.assertEqual(ran.returncode, 0, ran.stderr)
            version, where, stub = ran.stdout.split()
            self.assertRegex(version, r"^\d+\.\d+\.\d+$")
            self.assertTrue(where.startswith(site), where)
            self.assertEqual(stub, "True")


if __name__ == "__main__":
    unittest.main()
