"""`.sfignore`: which files of a context directory stay out of its archive (docs/core-api.md).

The syntax is .gitignore's, with the same rules as the C++ CLI (common/context/ignore_rules.h):

- one pattern per line; blank lines and lines starting with ``#`` are skipped; trailing spaces
  are trimmed; ``\\#`` and ``\\!`` at the start stand for a literal ``#`` and ``!``;
- ``!pattern`` re-includes what an earlier pattern excluded;
- a pattern with a ``/`` anywhere but at its end is anchored to the context's root (a leading
  ``/`` is dropped); otherwise it matches a name at any depth;
- a trailing ``/`` makes the pattern match directories only;
- ``*`` matches anything but ``/``, ``?`` one character but ``/``, ``[...]`` a class (``[!...]``
  or ``[^...]`` negated), and ``**`` any number of directories (``**/x``, ``a/**/b``, ``a/**``);
- the last pattern that matches a path decides; a directory that is excluded excludes
  everything under it (the caller does not descend into it, so nothing inside can be
  re-included, as in git).

Parsing never fails: a line that is not a meaningful pattern simply matches nothing. An
`IgnoreRules` is immutable once built, so it may be shared between threads.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["IgnoreRules", "glob_match"]


def _match_class(p: str, i: int, c: str) -> tuple[bool, int, bool]:
    """`[...]` at p[i] against c: (matched, index past the closing `]`, valid).

    Not valid when the class has no closing `]`; the `[` is then an ordinary character.
    """
    j = i + 1
    negate = False
    if j < len(p) and p[j] in "!^":
        negate = True
        j += 1
    matched = False
    first = True
    while j < len(p):
        if p[j] == "]" and not first:
            return matched != negate, j + 1, True
        first = False
        lo = p[j]
        if lo == "\\" and j + 1 < len(p):
            j += 1
            lo = p[j]
        hi = lo
        if j + 2 < len(p) and p[j + 1] == "-" and p[j + 2] != "]":
            hi = p[j + 2]
            j += 2
        if lo <= c <= hi:
            matched = True
        j += 1
    return False, 0, False


def glob_match(p: str, t: str) -> bool:
    """Whether glob `p` matches all of `t` (`*`, `?`, `[...]`, and `**` as whole segments)."""
    pi = ti = 0
    while pi < len(p):
        # `**` as a whole segment: any number of directories.
        if p.startswith("**", pi):
            starts_segment = pi == 0 or p[pi - 1] == "/"
            after = pi + 2
            ends_segment = after == len(p) or p[after] == "/"
            if starts_segment and ends_segment:
                if after == len(p):
                    return True  # `a/**`: everything under a/
                rest = p[after + 1:]
                if glob_match(rest, t[ti:]):
                    return True
                for k in range(ti, len(t)):
                    if t[k] == "/" and glob_match(rest, t[k + 1:]):
                        return True
                return False
        c = p[pi]
        if c == "*":
            while pi < len(p) and p[pi] == "*":
                pi += 1
            rest = p[pi:]
            k = ti
            while True:
                if glob_match(rest, t[k:]):
                    return True
                if k >= len(t) or t[k] == "/":
                    return False
                k += 1
        if ti >= len(t):
            return False
        if c == "?":
            if t[ti] == "/":
                return False
            pi += 1
            ti += 1
            continue
        if c == "[":
            matched, end, valid = _match_class(p, pi, t[ti])
            if valid:
                if not matched or t[ti] == "/":
                    return False
                pi = end
                ti += 1
                continue
        literal = c
        if c == "\\" and pi + 1 < len(p):
            pi += 1
            literal = p[pi]
        if t[ti] != literal:
            return False
        pi += 1
        ti += 1
    return ti == len(t)


@dataclass(frozen=True)
class _Rule:
    pattern: str
    negated: bool
    directory_only: bool
    anchored: bool


class IgnoreRules:
    """The parsed lines of one `.sfignore` file."""

    def __init__(self, rules: list[_Rule]) -> None:
        self._rules = tuple(rules)

    @classmethod
    def parse(cls, text: str) -> "IgnoreRules":
        """The rules in `text` (the file's contents). Never fails."""
        rules: list[_Rule] = []
        for raw in text.split("\n"):
            line = raw.rstrip(" \t\r")
            if not line or line[0] == "#":
                continue
            negated = False
            if line[0] == "!":
                negated = True
                line = line[1:]
            elif len(line) > 1 and line[0] == "\\" and line[1] in "!#":
                line = line[1:]
            directory_only = False
            if line.endswith("/"):
                directory_only = True
                line = line[:-1]
            anchored = False
            if "/" in line:
                anchored = True
                if line.startswith("/"):
                    line = line[1:]
            if not line:
                continue
            rules.append(_Rule(line, negated, directory_only, anchored))
        return cls(rules)

    def __len__(self) -> int:
        return len(self._rules)

    def excluded(self, path: str, is_directory: bool) -> bool:
        """Whether `path` (relative to the root, `/`-separated, no leading `/`) is excluded by
        the rules on their own; the caller skips the contents of an excluded directory."""
        name = path.rsplit("/", 1)[-1]
        excluded = False
        for r in self._rules:
            if r.directory_only and not is_directory:
                continue
            if glob_match(r.pattern, path if r.anchored else name):
                excluded = not r.negated
        return excluded
