"""Tests for :mod:`mushin_box._core.sidecars`: canonical JSON and atomic writes."""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import stat
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import assert_same
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mushin_box._core.sidecars as sidecars
from mushin_box._core.sidecars import (
    SidecarWarning,
    canonical_dumps,
    loads,
    read_json,
    write_bytes_atomic,
    write_json_atomic,
    write_text_atomic,
)

pytestmark = pytest.mark.floor  # the floor job's subset (scripts/floor)

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ---------------------------------------------------------------------------- helpers


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


# ------------------------------------------------------------------------- strategies

keys = st.text(max_size=6) | st.sampled_from(["__float__", "__dict__", "nan", "inf"])
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.sampled_from([float("nan"), float("inf"), float("-inf"), -0.0, 5e-324, 1e308])
    | st.text(alphabet=st.characters(), max_size=10)  # includes lone surrogates
    | st.sampled_from(["nan", "inf", "-inf", "__float__", "__dict__"])
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children, children)
        | st.dictionaries(keys, children, max_size=4)
    ),
    max_leaves=15,
)

# --------------------------------------------------------------------- canonical JSON


@SETTINGS
@given(value=json_values)
def test_round_trip(value: Any) -> None:
    data = canonical_dumps(value)
    assert_same(loads(data), value, key_order=False)
    assert_same(loads(data.decode("utf-8")), value, key_order=False)
    # Canonical: re-encoding the decoded value gives the same bytes.
    assert canonical_dumps(loads(data)) == data


@settings(SETTINGS, max_examples=100)
@given(
    items=st.dictionaries(keys, scalars | st.lists(scalars, max_size=3), min_size=2, max_size=6),
    seed=st.randoms(use_true_random=False),
)
def test_key_order_does_not_matter(items: dict[str, Any], seed: Any) -> None:
    shuffled = list(items.items())
    seed.shuffle(shuffled)
    reordered = dict(shuffled)
    nested = {"outer": reordered, "list": [reordered]}
    assert canonical_dumps(dict(shuffled)) == canonical_dumps(items)
    assert canonical_dumps(nested) == canonical_dumps({"list": [items], "outer": items})


def test_canonical_format() -> None:
    data = canonical_dumps({"b": [1, 2.5, None, True], "a": "é 😀", "c": {"z": 0, "y": -0.0}})
    assert data == '{"a":"é 😀","b":[1,2.5,null,true],"c":{"y":-0.0,"z":0}}\n'.encode()
    # Standard JSON: any parser can read it (tagged floats are plain objects).
    assert json.loads(canonical_dumps([float("nan")])) == [{"__float__": "nan"}]


def test_non_finite_floats_are_tagged() -> None:
    data = canonical_dumps({"x": [float("nan"), float("inf"), float("-inf")]})
    assert data == (b'{"x":[{"__float__":"nan"},{"__float__":"inf"},{"__float__":"-inf"}]}\n')
    assert b"NaN" not in data and b"Infinity" not in data
    decoded = loads(data)["x"]
    assert math.isnan(decoded[0]) and decoded[1:] == [math.inf, -math.inf]


def test_tag_lookalikes_stay_dicts() -> None:
    for value in [{"__float__": "nan"}, {"__dict__": {"a": 1}}, {"__float__": 1.0}]:
        data = canonical_dumps(value)
        assert data.startswith(b'{"__dict__":')
        assert loads(data) == value
    # Only one-key dicts are tags: larger dicts are written as is.
    assert canonical_dumps({"__float__": "nan", "b": 1}) == b'{"__float__":"nan","b":1}\n'


def test_a_tag_spelled_with_escapes_is_still_a_tag() -> None:
    # any JSON writer may escape a key's letters; the value is the same key
    assert math.isnan(loads(b'{"x":{"\\u005f_float__":"nan"}}')["x"])
    assert loads(b'{"\\u005f_dict__":{"__float__":"inf"}}') == {"__float__": "inf"}
    with pytest.raises(ValueError):
        loads(b'{"__fl\\u006fat__":"NaN"}')


@SETTINGS
@given(value=json_values)
def test_plain_json_is_read_as_any_parser_reads_it(value: Any) -> None:
    # a file without tags (the common case) decodes as the full walk decodes it
    text = json.dumps(value, allow_nan=True)
    try:
        walked = sidecars._decode(json.loads(text))
    except ValueError:
        walked = ValueError
    try:
        read = loads(text)
    except ValueError:
        read = ValueError
    if walked is ValueError or read is ValueError:
        assert walked is read
    else:
        assert_same(read, walked, key_order=False)


@pytest.mark.parametrize(
    "data",
    [b'{"__float__":"NaN"}', b'{"__float__":1}', b'{"__dict__":[1]}', b"[1,", b"\xff"],
)
def test_loads_rejects_malformed(data: bytes) -> None:
    with pytest.raises(ValueError):
        loads(data)


def test_numpy_scalars() -> None:
    value = {
        "f": np.float32(0.5),
        "n": np.float64("nan"),
        "i": np.int64(-3),
        "b": np.bool_(True),
        "s": np.str_("x"),
        "z": np.array(7),
    }
    decoded = loads(canonical_dumps(value))
    assert decoded["f"] == 0.5 and math.isnan(decoded["n"])
    assert decoded == {**decoded, "i": -3, "b": True, "s": "x", "z": 7}
    assert [type(decoded[k]) for k in "fibsz"] == [float, int, bool, str, int]


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ({"a": [1, {"b": object()}]}, r"object.*at \$\['a'\]\[1\]\['b'\]"),
        ({"arr": np.zeros(2)}, r"ndarray.*at \$\['arr'\]"),
        ([{1: "x"}], r"keys must be str.*int.*at \$\[0\]"),
        ({1, 2}, r"set"),
        (b"bytes", r"bytes"),
        (Path("p"), r"Path"),
    ],
)
def test_rejects_non_json_types_naming_the_path(value: Any, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        canonical_dumps(value)


def test_rejects_cycles() -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    with pytest.raises(ValueError, match=r"self-referencing.*\$\['self'\]"):
        canonical_dumps(loop)


# ----------------------------------------------------------------------- atomic files


def test_write_and_read(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "status.json"  # parents are created
    write_json_atomic(path, {"loss": float("nan"), "ok": True})
    assert path.read_bytes() == canonical_dumps({"ok": True, "loss": float("nan")})
    decoded = read_json(path)
    assert decoded["ok"] is True and math.isnan(decoded["loss"])
    write_json_atomic(str(path), [1])  # overwrite, str path
    assert read_json(path) == [1]
    assert leftovers(path.parent) == []


def test_write_bytes_and_text(tmp_path: Path) -> None:
    write_bytes_atomic(tmp_path / "x.bin", b"\x00\xff")
    assert (tmp_path / "x.bin").read_bytes() == b"\x00\xff"
    write_text_atomic(tmp_path / "tb.txt", "Traceback é\r\n")
    assert (tmp_path / "tb.txt").read_bytes() == "Traceback é\r\n".encode()
    write_text_atomic(tmp_path / "tb.txt", "bad \udcff", errors="backslashreplace")
    assert (tmp_path / "tb.txt").read_bytes() == b"bad \\udcff"
    with pytest.raises(UnicodeEncodeError):
        write_text_atomic(tmp_path / "tb.txt", "bad \udcff")
    assert (tmp_path / "tb.txt").read_bytes() == b"bad \\udcff"
    with pytest.raises(TypeError, match="bytes"):
        write_bytes_atomic(tmp_path / "x.bin", "text")  # type: ignore[arg-type]
    assert leftovers(tmp_path) == []


def test_missing_file_gives_default_silently(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_json(tmp_path / "nope.json") is None
        assert read_json(tmp_path / "nope.json", default={"d": 1}) == {"d": 1}


@pytest.mark.parametrize(
    "content", [b"", b'{"attempt": 3', b'{"a":[1,2', b"\xff\xfe{}", b'{"__float__":"x"}']
)
def test_corrupt_file_warns_and_gives_default(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "attempt.json"
    path.write_bytes(content)
    with pytest.warns(SidecarWarning, match=r"attempt\.json"):
        assert read_json(path, default="fallback") == "fallback"


def test_truncated_canonical_file(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    write_json_atomic(path, {"values": list(range(100)), "name": "run"})
    data = path.read_bytes()
    for cut in range(0, len(data) - 2, 7):  # every prefix that misses the closing brace
        path.write_bytes(data[:cut])
        with pytest.warns(SidecarWarning, match="corrupt sidecar"):
            assert read_json(path, default=None) is None


def test_unreadable_path_warns(tmp_path: Path) -> None:
    (tmp_path / "dir.json").mkdir()
    with pytest.warns(SidecarWarning, match=r"dir\.json"):
        assert read_json(tmp_path / "dir.json", default=0) == 0


def test_failed_serialization_leaves_file_intact(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    write_json_atomic(path, {"v": 1})
    before = path.read_bytes()
    with pytest.raises(TypeError, match="object"):
        write_json_atomic(path, {"v": object()})
    with pytest.raises(TypeError):
        write_json_atomic(tmp_path / "new" / "t.json", {1: 2})
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]


@pytest.mark.parametrize("failing", ["fsync", "replace"])
def test_failed_write_removes_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    path = tmp_path / "s.json"
    write_json_atomic(path, {"v": 1})
    before = path.read_bytes()

    def boom(*args: object) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr(sidecars.os, failing, boom)
    with pytest.raises(OSError, match="disk on fire"):
        write_json_atomic(path, {"v": 2})
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]


def test_fsyncs_file_then_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[bool] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(stat.S_ISDIR(os.fstat(fd).st_mode))
        real_fsync(fd)

    monkeypatch.setattr(sidecars.os, "fsync", recording_fsync)
    write_text_atomic(tmp_path / "f.txt", "x")
    assert synced == [False, True]


def test_long_file_names(tmp_path: Path) -> None:
    path = tmp_path / ("é" * 120 + ".json")  # 244 bytes: the temp name must stay shorter
    write_json_atomic(path, {"ok": 1})
    assert read_json(path) == {"ok": 1}
    assert leftovers(tmp_path) == []


# ------------------------------------------------------------------------- concurrency

WRITERS = 8
WRITES = 200


def payload(writer: int, seq: int) -> dict[str, Any]:
    # Different sizes per write (16-80 KiB), so a torn file could never look complete.
    size = 16_384 + ((writer * 7919 + seq * 104_729) % 65_536)
    return {"writer": writer, "seq": seq, "size": size, "blob": chr(0x41 + writer) * size}


def writer_process(path: str, writer: int) -> None:
    for seq in range(WRITES):
        write_json_atomic(path, payload(writer, seq))


def test_concurrent_writers_never_expose_partial_files(tmp_path: Path) -> None:
    path = tmp_path / "shared" / "status.json"
    if "fork" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("fork")
    else:  # pragma: no cover - macOS/Windows
        ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(target=writer_process, args=(str(path), w), daemon=True) for w in range(WRITERS)
    ]
    reads = 0
    seen_writers: set[int] = set()
    with warnings.catch_warnings():
        warnings.simplefilter("error", SidecarWarning)  # a torn read would warn
        for proc in procs:
            proc.start()
        deadline = time.monotonic() + 120
        existed = False
        while any(proc.is_alive() for proc in procs):
            assert time.monotonic() < deadline, "writers did not finish"
            value = read_json(path)
            if value is None:
                assert not existed, "the file vanished during a replace"
                continue
            existed = True
            reads += 1
            assert value == payload(value["writer"], value["seq"])
            seen_writers.add(value["writer"])
    for proc in procs:
        proc.join()
        assert proc.exitcode == 0
    final = read_json(path)
    assert final == payload(final["writer"], final["seq"])
    assert final["seq"] == WRITES - 1
    print(f"{reads} complete reads from {len(seen_writers)} writers")
    assert reads > 50
    assert len(seen_writers) > 1
    assert os.listdir(path.parent) == ["status.json"]


@pytest.mark.parametrize("find", [True, False])
def test_orphan_removal_begun_early_removes_only_old_temporaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, find: bool
) -> None:
    import shutil

    if not find:  # no find on this machine: the walk is done when finishing
        monkeypatch.setattr(shutil, "which", lambda name: str(tmp_path / "no-find"))
    old = tmp_path / "a=1" / ".hydra" / ".config.yaml.42.0123456789abcdef.tmp"
    young = tmp_path / "a=2" / ".mushin_status.json.43.0123456789abcdef.tmp"
    mine = tmp_path / "a=2" / ".notes.tmp"  # not a sidecar temporary
    for path in (old, young, mine):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{")
    hour_ago = time.time() - 3600
    for path in (old, mine):
        os.utime(path, (hour_ago, hour_ago))
    finish = sidecars.start_removing_orphans(tmp_path)
    assert finish() == [old]
    assert not old.exists() and young.exists() and mine.exists()


_ANY_TEXT = st.text(st.characters(), max_size=8) | st.sampled_from(
    ["__float__", "__dict__", "nan", "\ud800", "\u2028", "\x00", "é"]
)
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | _ANY_TEXT,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(_ANY_TEXT, inner, max_size=4)
        | st.dictionaries(st.integers(), inner, min_size=1, max_size=2)
    ),
    max_leaves=16,
)


@settings(max_examples=400, deadline=None)
@given(_VALUES)
def test_the_plain_path_writes_what_the_walk_writes(value: object) -> None:
    """``canonical_dumps`` takes ``json`` alone for plain values: the same bytes as the
    walk, and anything the walk must decide (NaN, tags, tuples, int keys) left to it."""
    fast = sidecars._plain_dumps(value)
    try:
        walked = sidecars._walked_dumps(value)
    except (TypeError, ValueError):
        assert fast is None
        return
    assert fast is None or fast == walked
