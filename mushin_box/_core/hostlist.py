# SPDX-License-Identifier: MIT
"""SLURM's compressed host lists (``gpu[001-004,010],cpu7``): expand and compress.

The grammar is the one ``scontrol show hostnames`` accepts on an ordinary (one-dimensional)
cluster, minus a few inputs SLURM silently repairs or guesses at, which are rejected here
with a :class:`ValueError` that says what is wrong and where:

* A list is entries separated by commas; commas inside ``[...]`` belong to the brackets.
  Surrounding whitespace is ignored; empty entries (``a,,b``), whitespace inside, an
  unbalanced or nested bracket are errors.
* An entry is literal text with bracket groups, e.g. ``rack[1-2]-node[01-02]``. The last
  group must end the entry (SLURM rejects ``a[1-2]b``); text may sit between groups.
* A group is comma-separated ranges ``lo`` or ``lo-hi`` of decimal digits, ``lo <= hi``.
  The width of a range is the number of digits of ``lo``: ``[08-10]`` gives ``08 09 10``,
  ``[9-10]`` gives ``9 10``. At most 65536 names per range (as SLURM).
* With several groups the names come out in SLURM's order: the group *before* the last
  varies slowest, then the earlier groups from right to left, and the last group fastest
  (``a[1-2]b[1-2]c[1-2]`` gives ``a1b1c1 a1b1c2 a2b1c1 a2b1c2 a1b2c1 ...``). Duplicates
  are kept, in order.

:func:`compress_hostlist` is the inverse: ``expand_hostlist(compress_hostlist(names)) ==
names`` for every list of valid host names (order and duplicates kept).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

__all__ = ["MAX_HOSTS", "MAX_RANGE", "compress_hostlist", "expand_hostlist"]

MAX_RANGE = 65536  #: most names one ``lo-hi`` range may produce (SLURM's limit)
MAX_HOSTS = 1 << 22  #: most names one expression may expand to (a guard against typos)

_FORBIDDEN = re.compile(r"[\[\],\s]")
_TRAILING_DIGITS = re.compile(r"^(.*?)(\d+)$", re.DOTALL)
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?\Z")

Range = tuple[int, int, int]  # lo, hi, width


def _err(text: str, where: int, why: str) -> ValueError:
    return ValueError(f"invalid host list {text!r} at position {where}: {why}")


def _split_entries(text: str) -> Iterator[tuple[int, str]]:
    """(start offset, entry) for each top-level comma-separated entry."""
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch == "[":
            if depth:
                raise _err(text, i, "nested '[' (brackets cannot be nested)")
            depth = 1
        elif ch == "]":
            if not depth:
                raise _err(text, i, "']' without a matching '['")
            depth = 0
        elif ch == "," and not depth:
            yield start, text[start:i]
            start = i + 1
        elif ch.isspace():
            raise _err(text, i, "whitespace inside a host list (separate entries with ',')")
    if depth:
        raise _err(text, text.rindex("["), "'[' is never closed")
    yield start, text[start:]


def _parse_group(text: str, offset: int, body: str) -> list[Range]:
    if not body:
        raise _err(text, offset, "empty brackets '[]'")
    ranges: list[Range] = []
    pos = offset + 1
    for part in body.split(","):
        m = _RANGE.match(part)
        if m is None:
            why = "empty range" if not part else f"{part!r} is not 'N' or 'N-M' (decimal digits)"
            raise _err(text, pos, why)
        lo_text, hi_text = m.group(1), m.group(2)
        lo = int(lo_text)
        hi = int(hi_text) if hi_text is not None else lo
        if lo > hi:
            raise _err(text, pos, f"range {part!r} runs backwards ({lo} > {hi})")
        if hi - lo + 1 > MAX_RANGE:
            raise _err(text, pos, f"range {part!r} has more than {MAX_RANGE} names")
        ranges.append((lo, hi, len(lo_text)))
        pos += len(part) + 1
    return ranges


def _numbers(ranges: list[Range]) -> list[str]:
    return [str(n).zfill(w) for lo, hi, w in ranges for n in range(lo, hi + 1)]


def _expand_entry(text: str, offset: int, entry: str) -> list[str]:
    if not entry:
        raise _err(text, offset, "empty entry (two commas in a row, or a leading/trailing comma)")
    # literal pieces and groups: entry = lit0 [g1] lit1 [g2] ... [gk] litk
    literals: list[str] = []
    groups: list[list[str]] = []
    pos = 0
    while True:
        open_at = entry.find("[", pos)
        if open_at < 0:
            literals.append(entry[pos:])
            break
        close_at = entry.index("]", open_at)
        literals.append(entry[pos:open_at])
        body = entry[open_at + 1 : close_at]
        groups.append(_numbers(_parse_group(text, offset + open_at, body)))
        pos = close_at + 1
    if not groups:
        return [entry]
    if literals[-1]:
        raise _err(
            text,
            offset + len(entry) - len(literals[-1]),
            f"text {literals[-1]!r} after the last ']' (SLURM allows none; "
            "write e.g. 'a[1-2]b[0]' for a1b0,a2b0)",
        )
    total = 1
    for g in groups:
        total *= len(g)
    if total > MAX_HOSTS:
        raise _err(text, offset, f"entry {entry!r} expands to {total} names (> {MAX_HOSTS})")
    k = len(groups)
    if k == 1:  # the common case, e.g. gpu[001-004]
        return [literals[0] + num for num in groups[0]]
    # SLURM's order: group k-1 slowest, then k-2 ... 1, then group k fastest
    order = [*range(k - 2, -1, -1), k - 1]  # group indices, slowest first
    out: list[str] = []
    choice = [""] * k

    def emit(level: int) -> None:
        if level == k:
            out.append("".join(lit + num for lit, num in zip(literals, choice, strict=False)))
            return
        g = order[level]
        for num in groups[g]:
            choice[g] = num
            emit(level + 1)

    emit(0)
    return out


def expand_hostlist(text: str) -> list[str]:
    """Expand a SLURM host list expression into host names, in SLURM's order.

    Parameters
    ----------
    text : str
        E.g. the value of ``SLURM_JOB_NODELIST``. ``""`` (or only whitespace) gives ``[]``.

    Returns
    -------
    list[str]
        The names, duplicates kept, as ``scontrol show hostnames`` prints them.

    Raises
    ------
    ValueError
        For malformed input (unbalanced brackets, empty entries or ranges, ``lo > hi``,
        non-digits in a range, text after the last group, too many names); the message
        gives the position.

    Examples
    --------
    >>> expand_hostlist("gpu[001-003,010],cpu7")
    ['gpu001', 'gpu002', 'gpu003', 'gpu010', 'cpu7']
    >>> expand_hostlist("rack[1-2]-node[01-02]")
    ['rack1-node01', 'rack1-node02', 'rack2-node01', 'rack2-node02']
    >>> expand_hostlist("n[9-11]")
    ['n9', 'n10', 'n11']
    >>> expand_hostlist("n[3-1]")
    Traceback (most recent call last):
    ...
    ValueError: invalid host list 'n[3-1]' at position 2: range '3-1' runs backwards (3 > 1)
    """
    if not isinstance(text, str):
        raise TypeError(f"a host list must be a str, got {type(text).__name__}")
    stripped = text.strip()
    if not stripped:
        return []
    out: list[str] = []
    for offset, entry in _split_entries(stripped):
        out.extend(_expand_entry(stripped, offset, entry))
        if len(out) > MAX_HOSTS:
            raise _err(stripped, offset, f"expands to more than {MAX_HOSTS} names")
    return out


def _check_name(name: object) -> str:
    if not isinstance(name, str):
        raise TypeError(f"host names must be str, got {type(name).__name__} ({name!r})")
    if not name:
        raise ValueError("host names must not be empty")
    bad = _FORBIDDEN.search(name)
    if bad:
        raise ValueError(
            f"host name {name!r} contains {bad.group()!r}; names in a SLURM host list cannot "
            "contain '[', ']', ',' or whitespace"
        )
    return name


def _fmt(n: int, width: int) -> str:
    return str(n).zfill(width)


def compress_hostlist(names: Iterable[str]) -> str:
    """Write host names as a compact SLURM host list expression.

    Consecutive names that share a prefix and whose numeric suffixes count up by one
    become one range; neighbours with the same prefix share one bracket group. Order and
    duplicates are kept, so :func:`expand_hostlist` gives the names back exactly.

    Parameters
    ----------
    names : iterable of str
        Host names; none may be empty or contain ``[``, ``]``, ``,`` or whitespace.

    Returns
    -------
    str
        The expression (``""`` for no names).

    Raises
    ------
    ValueError, TypeError
        For a name that cannot appear in a host list.

    Examples
    --------
    >>> compress_hostlist(["gpu001", "gpu002", "gpu003", "gpu010", "cpu7"])
    'gpu[001-003,010],cpu7'
    >>> compress_hostlist(["n9", "n10", "n11", "n08"])
    'n[9-11,08]'
    >>> expand_hostlist(compress_hostlist(["b", "a1", "a1"]))
    ['b', 'a1', 'a1']
    """
    # entries: (prefix, ranges) for numbered names, (name, None) for literal ones
    entries: list[tuple[str, list[list[int]] | None]] = []
    for raw in names:
        name = _check_name(raw)
        m = _TRAILING_DIGITS.match(name)
        if m is None:
            entries.append((name, None))
            continue
        prefix, digits = m.group(1), m.group(2)
        num = int(digits)
        last = entries[-1] if entries else None
        if last is not None and last[1] is not None and last[0] == prefix:
            ranges = last[1]
            lo, hi, width = ranges[-1]
            if num == hi + 1 and _fmt(num, width) == digits:
                ranges[-1][1] = num
            else:
                ranges.append([num, num, len(digits)])
        else:
            entries.append((prefix, [[num, num, len(digits)]]))
    parts: list[str] = []
    for prefix, ranges in entries:
        if ranges is None:
            parts.append(prefix)
        elif len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
            lo, _, width = ranges[0]
            parts.append(prefix + _fmt(lo, width))
        else:
            body = ",".join(
                _fmt(lo, w) if lo == hi else f"{_fmt(lo, w)}-{_fmt(hi, w)}" for lo, hi, w in ranges
            )
            parts.append(f"{prefix}[{body}]")
    return ",".join(parts)
