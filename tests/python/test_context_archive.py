""".sfignore rules and context archives (steadfast/_sfignore.py, steadfast/_context_archive.py),
checked against the table the C++ implementation is also checked against."""

from __future__ import annotations

import io
import os
import shutil
import stat
import tarfile
import tempfile
import unittest

from steadfast._context_archive import LIMIT_BYTES, list_context, pack_context
from steadfast._sfignore import IgnoreRules, glob_match

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TABLE = os.path.join(REPO, "tests", "data", "sfignore_cases.tsv")

# Cases beyond the shared table: the Python side's own.
MORE_CASES = [
    # (rules, path, is_dir, excluded)
    (["**/x"], "a/b/x", False, True),
    (["**/x"], "x", False, True),
    (["a/**/b"], "a/b", True, True),
    (["a/**/b"], "xa/b", False, False),
    (["*.py", "!keep/*.py"], "keep/a.py", False, False),
    (["*.py", "!keep/*.py"], "other/keep/a.py", False, True),
    (["/build"], "build", False, True),
    (["build/"], "build", False, False),
    (["# just a comment", "", "   "], "anything", False, False),
    (["*.o   "], "x.o", False, True),  # trailing spaces trimmed
    (["\\!important"], "!important", False, True),
    (["[a-"], "[a-", False, True),  # no closing ]: a literal [
    (["?"], "a/b", False, True),  # name match at depth
    (["a?c"], "a/c", False, False),  # ? never matches /
    (["a*c"], "a/c", False, False),  # * never matches /
    (["[^x]y"], "zy", False, True),
    (["data", "!data"], "data", True, False),
]


class IgnoreRulesTest(unittest.TestCase):
    def check(self, rules: list[str], path: str, is_dir: bool, excluded: bool) -> None:
        got = IgnoreRules.parse("\n".join(rules) + "\n").excluded(path, is_dir)
        self.assertEqual(got, excluded,
                         f"rules {rules} path {path} ({'dir' if is_dir else 'file'})")

    def test_every_case_of_the_shared_table(self) -> None:
        cases = 0
        with open(TABLE, encoding="utf-8") as f:
            for line in f:
                line = line.rstrip("\n")
                if not line or line.startswith("##"):
                    continue
                rules, path, kind, verdict = line.split("\t")
                self.check(rules.split(" | "), path, kind == "dir", verdict == "excluded")
                cases += 1
        self.assertGreater(cases, 30)

    def test_more_cases(self) -> None:
        for rules, path, is_dir, excluded in MORE_CASES:
            self.check(rules, path, is_dir, excluded)

    def test_blank_and_comment_lines_are_not_rules(self) -> None:
        self.assertEqual(len(IgnoreRules.parse("\n# a comment\n   \n*.o  \n")), 1)
        self.assertTrue(glob_match("a/**", "a/b/c"))
        self.assertFalse(glob_match("a/**", "a"))


class ContextArchiveTest(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="sf-context-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)

    def write(self, rel: str, data: bytes = b"x", mode: int = 0o644) -> None:
        path = os.path.join(self.dir, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, mode)

    def test_packs_files_modes_dirs_and_links_minus_what_sfignore_excludes(self) -> None:
        self.write("train.py", b"print('hi')\n")
        self.write("run.sh", b"#!/bin/sh\necho run\n", 0o755)
        self.write("pkg/model.py", b"X = 1\n")
        self.write("pkg/__pycache__/model.cpython-311.pyc", b"junk")
        self.write("data/big.bin", b"x" * 1000)
        self.write("data/keep.txt", b"k")  # inside an excluded directory: stays out
        self.write("logs/a.log", b"l")
        self.write("logs/keep.log", b"kept")
        os.symlink("pkg/model.py", os.path.join(self.dir, "link.py"))
        os.mkfifo(os.path.join(self.dir, "fifo"))
        self.write(".sfignore", b"# build leftovers\n__pycache__/\n/data\n!data/keep.txt\n"
                                b"*.log\n!keep.log\n")
        archive = pack_context(self.dir)
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
            members = tar.getmembers()
            names = [m.name for m in members]
            self.assertEqual(names, sorted(names))
            self.assertEqual(names, [".sfignore", "link.py", "logs", "logs/keep.log", "pkg",
                                     "pkg/model.py", "run.sh", "train.py"])
            by_name = {m.name: m for m in members}
            self.assertTrue(by_name["logs"].isdir())
            self.assertTrue(by_name["link.py"].issym())
            self.assertEqual(by_name["link.py"].linkname, "pkg/model.py")
            self.assertEqual(stat.S_IMODE(by_name["run.sh"].mode), 0o755)
            self.assertEqual(stat.S_IMODE(by_name["train.py"].mode), 0o644)
            self.assertEqual(tar.extractfile("run.sh").read(), b"#!/bin/sh\necho run\n")
            self.assertEqual(tar.extractfile("logs/keep.log").read(), b"kept")

    def test_more_than_96_mib_is_refused_naming_the_largest_files(self) -> None:
        for name, mib in [("model.pt", 60), ("data.npy", 40), ("small.bin", 1)]:
            with open(os.path.join(self.dir, name), "wb") as f:
                f.truncate(mib << 20)  # sparse: no disk space used
        self.write("train.py", b"pass\n")
        with self.assertRaises(ValueError) as caught:
            pack_context(self.dir)
        message = str(caught.exception)
        self.assertEqual(
            message,
            f"context directory {self.dir} holds 101.0 MiB in 4 files, more than the 96 MiB "
            f"limit; list what the trials do not need in {self.dir}/.sfignore (largest: "
            f"model.pt (60.0 MiB), data.npy (40.0 MiB), small.bin (1.0 MiB))")
        # Listed in .sfignore, they no longer count.
        self.write(".sfignore", b"*.pt\n")
        self.assertLess(sum(e.size for e in list_context(self.dir)), LIMIT_BYTES)
        with tarfile.open(fileobj=io.BytesIO(pack_context(self.dir)), mode="r:gz") as tar:
            self.assertEqual(tar.getnames(), [".sfignore", "data.npy", "small.bin", "train.py"])

    def test_a_missing_directory_is_an_error_naming_it(self) -> None:
        with self.assertRaisesRegex(FileNotFoundError, "nowhere"):
            pack_context(os.path.join(self.dir, "nowhere"))


if __name__ == "__main__":
    unittest.main()
