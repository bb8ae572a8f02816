"""The policy "a user's own install wins if newer" (docs/core-api.md, "What a task gets").

The agent puts the `steadfast` package of its own build first on PYTHONPATH. A user who
installed a newer `steadfast` (pip) into the task's Python gets that one instead: when
`importlib.metadata` finds a distribution named `steadfast` whose version is strictly newer
than ours and whose files live in another directory, `switch_to_newer_install` imports it (with
our directory out of sys.path for the import) and makes it `sys.modules["steadfast"]`.

Never raises: a distribution whose metadata cannot be read is ignored, and a newer install that
fails to import leaves ours in use (with a line on stderr saying why).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import re
import sys
from types import ModuleType
from typing import Optional

__all__ = ["parse_version", "switch_to_newer_install"]


def parse_version(text: str) -> tuple[int, ...]:
    """The leading numeric release of a version string: "0.2.0rc1" -> (0, 2, 0); () when none.

    Pre-release and local suffixes are ignored: 0.2.0rc1 counts as 0.2.0.
    """
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", text or "")
    if not m:
        return ()
    parts = [int(p) for p in m.group(1).split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()  # 1.0 == 1.0.0
    return tuple(parts)


def _package_dir(dist: importlib.metadata.Distribution) -> Optional[str]:
    """The directory of the `steadfast` package that `dist` installed, if it can be found."""
    candidates = []
    for f in dist.files or []:
        if str(f).replace("\\", "/") == "steadfast/__init__.py":
            candidates.append(dist.locate_file(f))
    candidates.append(dist.locate_file("steadfast/__init__.py"))
    for c in candidates:
        path = os.fspath(c)
        if os.path.isfile(path):
            return os.path.realpath(os.path.dirname(path))
    return None


def _newest_other(our_dir: str, our_version: str) -> Optional[tuple[str, str]]:
    """(version, package directory) of the newest installed steadfast newer than ours."""
    best: Optional[tuple[tuple[int, ...], str, str]] = None
    try:
        dists = list(importlib.metadata.distributions(name="steadfast"))
    except Exception:  # a broken metadata directory somewhere on sys.path
        return None
    for dist in dists:
        try:
            version = dist.version or ""
            where = _package_dir(dist)
        except Exception:
            continue
        if not where or where == our_dir:
            continue
        parsed = parse_version(version)
        if parsed <= parse_version(our_version):
            continue
        if best is None or parsed > best[0]:
            best = (parsed, version, where)
    return (best[1], best[2]) if best else None


def switch_to_newer_install(name: str, init_file: str, our_version: str) -> Optional[ModuleType]:
    """Imports a strictly newer installed `steadfast` in place of the package at `init_file`.

    Returns the newer package (now in sys.modules under `name`, with its submodules), or None
    when ours stays in use. Called once, from our `__init__`.
    """
    our_dir = os.path.realpath(os.path.dirname(init_file))
    found = _newest_other(our_dir, our_version)
    if found is None:
        return None
    version, where = found
    our_parent = os.path.dirname(our_dir)
    saved_path = list(sys.path)
    saved_modules = {k: v for k, v in sys.modules.items() if k == name or k.startswith(name + ".")}
    # Out of sys.path for the import: every entry that resolves to our package's parent
    # (PYTHONPATH may name it by another spelling, or as "" for the working directory).
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.getcwd()) != our_parent]
    for k in saved_modules:
        del sys.modules[k]
    importlib.invalidate_caches()
    try:
        module = importlib.import_module(name)
        module_dir = os.path.realpath(os.path.dirname(getattr(module, "__file__", "") or ""))
        if module_dir != where:
            raise ImportError(f"found {module_dir} on sys.path before {where}")
    except Exception as e:  # keep ours: the user's install is broken or shadowed
        for k in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
            del sys.modules[k]
        sys.modules.update(saved_modules)
        sys.path[:] = saved_path
        print(f"steadfast: using steadfast {our_version} from {our_dir}: the newer installed "
              f"steadfast {version} at {where} does not import ({type(e).__name__}: {e})",
              file=sys.stderr, flush=True)
        return None
    sys.path[:] = saved_path
    sys.modules[name] = module
    print(f"steadfast: using the installed steadfast {version} from {where} (newer than "
          f"{our_version} at {our_dir})", file=sys.stderr, flush=True)
    return module
