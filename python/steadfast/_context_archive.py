"""Packing an experiment's context directory (docs/core-api.md, "The experiment").

The archive is a gzip-compressed tar of the directory: entries named relative to it (no
leading ``./``), sorted by path, holding regular files (their mode kept, the executable bit
included), directories and symbolic links (as links, never followed). Files that the
directory's ``.sfignore`` excludes (see `steadfast._sfignore`) are left out; other kinds of
files (sockets, FIFOs, devices) are skipped. The C++ CLI packs with the same rules.

At most `LIMIT_BYTES` of file content may go in: more is a ValueError that names the largest
files, raised before any file is read.
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
from dataclasses import dataclass

from ._sfignore import IgnoreRules

__all__ = ["LIMIT_BYTES", "ContextEntry", "list_context", "pack_context"]

LIMIT_BYTES = 96 * 1024 * 1024
_MIB = 1024 * 1024


@dataclass(frozen=True)
class ContextEntry:
    """One path of a context directory that goes into its archive."""

    path: str  # relative, `/`-separated
    kind: str  # "file" | "dir" | "symlink"
    size: int  # bytes, for files; 0 otherwise
    mode: int  # permission bits
    mtime: int
    link_target: str = ""


def _read_rules(directory: str) -> IgnoreRules:
    try:
        with open(os.path.join(directory, ".sfignore"), encoding="utf-8", errors="replace") as f:
            return IgnoreRules.parse(f.read())
    except FileNotFoundError:
        return IgnoreRules([])


def list_context(directory: str) -> list[ContextEntry]:
    """The entries of `directory` that its `.sfignore` keeps, sorted by path.

    Raises FileNotFoundError / NotADirectoryError when `directory` is not a directory, and
    OSError when a part of it cannot be read.
    """
    if not os.path.isdir(directory):
        if not os.path.exists(directory):
            raise FileNotFoundError(f"context directory {directory} does not exist")
        raise NotADirectoryError(f"context directory {directory} is not a directory")
    rules = _read_rules(directory)
    entries: list[ContextEntry] = []

    def walk(abs_dir: str, rel_dir: str) -> None:
        with os.scandir(abs_dir) as it:
            children = sorted(it, key=lambda e: e.name)
        for e in children:
            rel = f"{rel_dir}/{e.name}" if rel_dir else e.name
            st = e.stat(follow_symlinks=False)
            mtime = int(st.st_mtime)
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                if rules.excluded(rel, False):
                    continue
                entries.append(ContextEntry(rel, "symlink", 0, mode, mtime, os.readlink(e.path)))
            elif stat.S_ISDIR(st.st_mode):
                if rules.excluded(rel, True):
                    continue
                entries.append(ContextEntry(rel, "dir", 0, mode, mtime))
                walk(e.path, rel)
            elif stat.S_ISREG(st.st_mode):
                if rules.excluded(rel, False):
                    continue
                entries.append(ContextEntry(rel, "file", st.st_size, mode, mtime))

    walk(directory, "")
    entries.sort(key=lambda e: e.path)
    return entries


def _check_size(directory: str, entries: list[ContextEntry]) -> None:
    files = [e for e in entries if e.kind == "file"]
    total = sum(e.size for e in files)
    if total <= LIMIT_BYTES:
        return
    largest = sorted(files, key=lambda e: (-e.size, e.path))[:3]
    listed = ", ".join(f"{e.path} ({e.size / _MIB:.1f} MiB)" for e in largest)
    raise ValueError(
        f"context directory {directory} holds {total / _MIB:.1f} MiB in {len(files)} files, more "
        f"than the {LIMIT_BYTES // _MIB} MiB limit; list what the trials do not need in "
        f"{os.path.join(directory, '.sfignore')} (largest: {listed})")


def pack_context(directory: str) -> bytes:
    """The gzip-compressed tar of `directory`, as the module docstring says.

    Raises ValueError when its files hold more than `LIMIT_BYTES`, OSError when one cannot be
    read, FileNotFoundError when `directory` does not exist.
    """
    entries = list_context(directory)
    _check_size(os.path.abspath(directory), entries)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for e in entries:
            info = tarfile.TarInfo(e.path)
            info.mode = e.mode
            info.mtime = e.mtime
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if e.kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif e.kind == "symlink":
                info.type = tarfile.SYMTYPE
                info.linkname = e.link_target
                tar.addfile(info)
            else:
                with open(os.path.join(directory, *e.path.split("/")), "rb") as f:
                    # The size as read now: a file that changed since the listing is packed
                    # as it is, not cut or padded.
                    data = f.read()
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
