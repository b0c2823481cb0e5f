"""Atomic, canonical JSON sidecars, read by other processes while they are rewritten.

- :func:`canonical_dumps`: one byte string per value (sorted keys, no whitespace, UTF-8).
  NaN and infinities are tagged (``{"__float__":"nan"}``), and a real one-key dict whose key
  is a tag is wrapped (``{"__dict__":{...}}``), so :func:`loads` restores both.
- :func:`write_bytes_atomic`: a temporary renamed over the file: readers see the old file or
  the new one (fsync: :mod:`mushin_box._core.durable`).
- :func:`read_json` warns and returns a default for a damaged or hostile file: one corrupt
  sidecar cannot take down a resume or a report.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import json
import math
import os
import re
import secrets
import subprocess
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mushin_box._core import durable
from mushin_box._core.layout import OBJECT_SIDECARS, read_limit
from mushin_box._core.overrides import LONE_SURROGATE, is_array_scalar
from mushin_box._core.safeio import UnsafeFileError, read_bounded

StrPath = str | os.PathLike[str]

_FLOAT_TAG = "__float__"
_DICT_TAG = "__dict__"
_TAGS = frozenset({_FLOAT_TAG, _DICT_TAG})
_SPECIAL_FLOATS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
#: the temporary of :func:`write_bytes_atomic`: ``.<name>.<pid>.<16 hex>.tmp``
_TEMPORARY_RE = re.compile(r"^\..+\.\d+\.[0-9a-f]{16}\.tmp\Z")
#: a sidecar write takes milliseconds: a temporary this old lost its writer
ORPHAN_AGE_S = 600.0


class SidecarWarning(UserWarning):
    """A sidecar file exists but could not be read or decoded; a default was used."""


_dumps = functools.partial(
    json.dumps, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


@functools.lru_cache(maxsize=10_000)
def warn_sidecar(message: str) -> None:
    """Warn with :class:`SidecarWarning`, once per message in a process (``wait`` and
    ``logs -f`` look again and again; every ``subprocess`` call undoes Python's own once).

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     for _ in range(3):
    ...         warn_sidecar("sidecar 'x.json' is corrupt (doctest)")
    >>> len(seen)
    1
    """
    # placed at no source line, so that it prints as one line ("mushin-box:0: SidecarWarning:
    # ..."), not two with a line of the kit's code that tells a user nothing
    warnings.warn_explicit(
        message, SidecarWarning, filename="mushin-box", lineno=0, module="mushin_box"
    )


def timestamp() -> str:
    """Now, as every sidecar writes it: UTC, ISO 8601, to the millisecond (the order of two
    events a few ms apart is then readable).

    >>> stamp = timestamp()
    >>> stamp.endswith("+00:00") and len(stamp) == len("2026-12-02T17:44:02.316+00:00")
    True
    """
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")


def _where(path: Any) -> str:
    """`` at $['a'][3]`` from the chain ``(("$", "a"), 3)`` that :func:`_encode` keeps, spelled
    out only for an error (a manifest of 10,000 cells has 200,000 values)."""
    keys = []
    while isinstance(path, tuple):
        path, key = path
        keys.append(f"[{key!r}]" if isinstance(key, str) else f"[{key}]")
    return f" at {path}{''.join(reversed(keys))}" if keys else ""


def _encode(obj: object, path: Any, active: set[int]) -> Any:
    """``obj`` in plain JSON types, non-finite floats tagged (``path``: see :func:`_where`)."""
    if obj is None or isinstance(obj, bool):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        if math.isnan(obj):
            return {_FLOAT_TAG: "nan"}
        if math.isinf(obj):
            return {_FLOAT_TAG: "inf" if obj > 0 else "-inf"}
        return float(obj)
    if isinstance(obj, str):
        return str.__str__(obj)
    if is_array_scalar(obj):
        return _encode(obj.item(), path, active)  # type: ignore[attr-defined]
    if isinstance(obj, Mapping | Sequence) and not isinstance(obj, bytes | bytearray):
        if id(obj) in active:
            raise ValueError(f"cannot serialize a self-referencing container{_where(path)}")
        active.add(id(obj))
        try:
            if isinstance(obj, Mapping):
                out: dict[str, Any] = {}
                for key, value in obj.items():
                    if not isinstance(key, str):
                        raise TypeError(
                            f"JSON object keys must be str, got {type(key).__qualname__} "
                            f"({key!r}){_where(path)}"
                        )
                    out[str.__str__(key)] = _encode(value, (path, key), active)
                if len(out) == 1 and next(iter(out)) in _TAGS:
                    return {_DICT_TAG: out}  # escape: a real dict that looks like a tag
                return out
            return [_encode(value, (path, i), active) for i, value in enumerate(obj)]
        finally:
            active.discard(id(obj))
    raise TypeError(
        f"cannot serialize a value of type {type(obj).__qualname__} to JSON{_where(path)}; "
        "supported are None, bool, int, float, str, numpy-like scalars, lists/tuples and "
        "dicts with str keys (convert it first, e.g. str(path), array.tolist())"
    )


def _decode(obj: Any) -> Any:
    """Inverse of :func:`_encode` on a freshly parsed JSON value."""
    if isinstance(obj, list):
        return [_decode(value) for value in obj]
    if not isinstance(obj, dict):
        return obj
    if len(obj) == 1:
        ((key, value),) = obj.items()
        if key == _FLOAT_TAG:
            if not isinstance(value, str) or value not in _SPECIAL_FLOATS:
                raise ValueError(f"invalid tagged float {{{_FLOAT_TAG!r}: {value!r}}}")
            return _SPECIAL_FLOATS[value]
        if key == _DICT_TAG:
            if not isinstance(value, dict):
                raise ValueError(f"invalid tagged dict {{{_DICT_TAG!r}: {value!r}}}")
            return {k: _decode(v) for k, v in value.items()}
    return {k: _decode(v) for k, v in obj.items()}


def _plain_dumps(obj: object) -> bytes | None:
    """:func:`canonical_dumps` by C ``json`` alone (a resume dumps 10,000 fingerprints), or
    None where the walk must decide (a NaN, a tag, a tuple, a non-``str`` key...)."""
    try:
        text = _dumps(obj)
        if _may_hold_tags(text) or json.loads(text) != obj:
            return None
        return text.encode("utf-8") + b"\n"
    except (TypeError, ValueError):  # UnicodeEncodeError (a lone surrogate) included
        return None


def canonical_dumps(obj: object) -> bytes:
    """``obj`` as canonical JSON bytes (module doc), lone surrogates as ``\\udXXX`` escapes;
    an error for a value it cannot write names its key path (``$['metrics'][3]``).

    >>> canonical_dumps({"b": [1, float("nan")], "a": "é"})
    b'{"a":"\\xc3\\xa9","b":[1,{"__float__":"nan"}]}\\n'
    """
    fast = _plain_dumps(obj)
    return fast if fast is not None else _walked_dumps(obj)


def _walked_dumps(obj: object) -> bytes:
    """:func:`canonical_dumps` by the walk, for any value."""
    text = _dumps(_encode(obj, "$", set()))
    text = LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text.encode("utf-8") + b"\n"


def loads(data: bytes | str) -> Any:
    """Parse JSON written by :func:`canonical_dumps` (``bytes`` as UTF-8), restoring tagged
    floats; a ``ValueError`` for what is not UTF-8 JSON or holds a malformed tag.

    >>> loads(b'{"x":{"__float__":"-inf"},"y":[1.5]}\\n')
    {'x': -inf, 'y': [1.5]}
    """
    if isinstance(data, bytes | bytearray):
        data = bytes(data).decode("utf-8")
    if not _may_hold_tags(data):
        return json.loads(data)  # nothing to restore: ~5x faster than walking every value
    return _decode(json.loads(data))


def _may_hold_tags(text: str) -> bool:
    """Could ``text`` hold a tag key? Not without its name or a ``\\u`` escape (the only
    other way to spell its letters); else :func:`_decode` is the identity.

    >>> _may_hold_tags('{"loss":[1.5,2]}'), _may_hold_tags('{"x":{"__float__":"nan"}}')
    (False, True)
    """
    return _FLOAT_TAG in text or _DICT_TAG in text or "\\u" in text


def write_bytes_atomic(path: StrPath, data: bytes, *, mode: int = 0o666) -> None:
    """Atomically replace ``path`` with ``data``, created with ``mode`` less the umask
    (``0o600``: only its owner may read it, from its first byte on). The file and its
    directory are fsynced, or inside :func:`mushin_box._core.durable.deferred` at its commit.

    >>> import tempfile
    >>> target = Path(tempfile.mkdtemp()) / "sub" / "out.bin"
    >>> write_bytes_atomic(target, b"ok")
    >>> target.read_bytes()
    b'ok'
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"data must be bytes, got {type(data).__qualname__}")
    target = Path(path)
    directory = target.parent
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{target.name[:40]}.{os.getpid()}.{secrets.token_hex(8)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), mode)
    later = durable.deferring()
    try:
        with open(fd, "wb", closefd=True) as handle:
            handle.write(data)
            handle.flush()
            if not later:
                os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if later:
        durable.remember(target)
    else:
        durable.fsync_directory(directory)


def write_text_atomic(path: StrPath, text: str, *, errors: str = "strict") -> None:
    """:func:`write_bytes_atomic` of ``text`` in UTF-8 (no newline translation);
    ``errors="backslashreplace"`` for text of unknown origin such as tracebacks.

    >>> import tempfile
    >>> target = Path(tempfile.mkdtemp()) / "traceback.txt"
    >>> write_text_atomic(target, "Traceback ...\\n")
    >>> target.read_text()
    'Traceback ...\\n'
    """
    write_bytes_atomic(path, text.encode("utf-8", errors))


def write_json_atomic(path: StrPath, obj: object) -> None:
    """:func:`write_bytes_atomic` of :func:`canonical_dumps`.

    >>> import tempfile
    >>> target = Path(tempfile.mkdtemp()) / "status.json"
    >>> write_json_atomic(target, {"state": "done", "loss": float("nan")})
    >>> read_json(target)
    {'loss': nan, 'state': 'done'}
    """
    write_bytes_atomic(path, canonical_dumps(obj))


def read_json(path: StrPath, *, default: Any = None) -> Any:
    """A JSON sidecar (:func:`loads`), or ``default`` (as is, not copied) when it is missing.

    A file :mod:`mushin_box._core.safeio` refuses, or a corrupt one (not an object where one
    is due too), warns with a :class:`SidecarWarning` naming the file and gives ``default``.

    >>> import tempfile
    >>> directory = Path(tempfile.mkdtemp())
    >>> read_json(directory / "missing.json", default={})
    {}
    >>> _ = (directory / "bad.json").write_text('{"trunc')
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", SidecarWarning)
    ...     read_json(directory / "bad.json", default="fallback")
    'fallback'
    """
    where = os.fspath(path)  # os.path, not Path: a resume calls this 30,000 times
    try:
        data = read_bounded(where, read_limit(os.path.basename(where)))
    except FileNotFoundError:
        return default
    except UnsafeFileError as exc:
        warn_sidecar(
            f"refused sidecar {where!r} ({exc}); using the default: put the real "
            "file in its place, or delete it (a resume writes it again)"
        )
        return default
    except OSError as exc:
        warn_sidecar(f"cannot read sidecar {where!r} ({exc}); using the default")
        return default
    try:
        value = loads(data)
    except (ValueError, RecursionError) as exc:
        problem = f"{len(data)} bytes: {type(exc).__name__}: {exc}"
    else:
        if os.path.basename(where) not in OBJECT_SIDECARS or isinstance(value, dict):
            return value
        problem = f"a JSON {type(value).__name__}, not an object"
    warn_sidecar(f"corrupt sidecar {where!r} ({problem}); using the default")
    return default


def _remove_old(paths: Iterable[Path]) -> list[Path]:
    cutoff = time.time() - ORPHAN_AGE_S
    removed = []
    for path in paths:
        if not _TEMPORARY_RE.match(path.name):
            continue
        with contextlib.suppress(OSError):  # gone already, or not ours to remove
            if path.stat().st_mtime < cutoff:
                path.unlink()
                removed.append(path)
    return removed


def start_removing_orphans(root: StrPath) -> Callable[[], list[Path]]:
    """Begin removing the temporaries that killed writers left under ``root`` (older than
    :data:`ORPHAN_AGE_S`: the writer may be on another node); call what it returns to finish.
    ``find`` lists a sweep's 40,000 directories in another process while the run decides its
    cells (a thread would hold the GIL); without it, ``os.walk`` does, when finishing.
    """
    where = os.path.abspath(root)  # never an argument find takes for an option
    try:
        proc = subprocess.Popen(
            ["find", where, "-name", ".*.tmp", "-print0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        proc = None

    def finish() -> list[Path]:
        out = proc.communicate()[0] if proc is not None else b""
        if proc is None or proc.returncode != 0:  # no find, or a directory it could not read
            return _remove_old(Path(d, name) for d, _, files in os.walk(root) for name in files)
        return _remove_old(Path(os.fsdecode(raw)) for raw in out.split(b"\0") if raw)

    return finish
