"""The policy "a user's own install wins if newer" (steadfast/_newer_install.py): the agent's
package comes first on PYTHONPATH; a strictly newer installed `steadfast` elsewhere is loaded
instead."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

import steadfast
from steadfast._newer_install import parse_version

from trial_link_server import clean_env

OURS = os.path.dirname(os.path.dirname(os.path.abspath(steadfast.__file__)))


class NewerInstallTest(unittest.TestCase):
    def setUp(self) -> None:
        self.site = tempfile.mkdtemp(prefix="sf-site-")
        self.addCleanup(shutil.rmtree, self.site, ignore_errors=True)

    def install_fake(self, version: str, broken: bool = False) -> None:
        """A pip-style install of `steadfast` `version` into the temp site directory."""
        package = os.path.join(self.site, "steadfast")
        os.makedirs(os.path.join(package, "core"))
        with open(os.path.join(package, "__init__.py"), "w") as f:
            f.write(textwrap.dedent(f"""
                __version__ = "{version}"
                WHICH = "user"
                from . import core
                """) + ("raise ImportError('half-installed')\n" if broken else ""))
        with open(os.path.join(package, "core", "__init__.py"), "w") as f:
            f.write("def init(**kwargs):\n    return 'user init'\n")
        info = os.path.join(self.site, f"steadfast-{version}.dist-info")
        os.makedirs(info)
        with open(os.path.join(info, "METADATA"), "w") as f:
            f.write(f"Metadata-Version: 2.1\nName: steadfast\nVersion: {version}\n")
        with open(os.path.join(info, "RECORD"), "w") as f:
            f.write("steadfast/__init__.py,,\nsteadfast/core/__init__.py,,\n"
                    f"steadfast-{version}.dist-info/METADATA,,\n")

    def import_steadfast(self) -> subprocess.CompletedProcess:
        code = ("import steadfast, steadfast.core, sys; "
                "print('WHICH', getattr(steadfast, 'WHICH', 'agent'), steadfast.__version__, "
                "steadfast.core.init.__module__, sys.modules['steadfast'] is steadfast)")
        env = clean_env(PYTHONPATH=os.pathsep.join([OURS, self.site]))
        p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return p

    def test_a_newer_user_install_wins_and_says_so(self) -> None:
        self.install_fake("9.9.9")
        p = self.import_steadfast()
        self.assertIn("WHICH user 9.9.9 steadfast.core True", p.stdout)
        self.assertEqual(p.stderr.strip(),
                         f"steadfast: using the installed steadfast 9.9.9 from "
                         f"{os.path.realpath(os.path.join(self.site, 'steadfast'))} (newer than "
                         f"{steadfast.__version__} at {os.path.realpath(os.path.join(OURS, 'steadfast'))})")

    def test_an_older_or_equal_install_does_not(self) -> None:
        for version in ["0.0.1", steadfast.__version__]:
            with self.subTest(version=version):
                shutil.rmtree(self.site)
                os.makedirs(self.site)
                self.install_fake(version)
                p = self.import_steadfast()
                self.assertIn(f"WHICH agent {steadfast.__version__} steadfast.core._context True",
                              p.stdout)
                self.assertEqual(p.stderr, "")

    def test_a_newer_install_that_fails_to_import_leaves_ours(self) -> None:
        self.install_fake("9.9.9", broken=True)
        p = self.import_steadfast()
        self.assertIn(f"WHICH agent {steadfast.__version__} steadfast.core._context True",
                      p.stdout)
        self.assertIn("does not import (ImportError: half-installed)", p.stderr)

    def test_versions_compare_by_their_numbers(self) -> None:
        self.assertGreater(parse_version("0.10.0"), parse_version("0.9.9"))
        self.assertEqual(parse_version("1.0"), parse_version("1.0.0"))
        self.assertEqual(parse_version("0.2.0rc1"), (0, 2))
        self.assertEqual(parse_version("garbage"), ())


if __name__ == "__main__":
    unittest.main()
