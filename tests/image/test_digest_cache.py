# SPDX-License-Identifier: MIT
"""The image digest is cached per version of the file, and a changed file is hashed again."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from mushin_box._image import digest as dg


@pytest.fixture
def hashes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every file actually read and hashed; the cache lives under tmp_path."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    seen: list[str] = []
    real = dg._hash

    def counted(path: str, size: int, progress: bool) -> str:
        seen.append(path)
        return real(path, size, progress)

    monkeypatch.setattr(dg, "_hash", counted)
    return seen


def _image(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "image.sif"
    path.write_bytes(data)
    return path


def test_an_unchanged_image_is_hashed_once(tmp_path: Path, hashes: list[str]) -> None:
    path = _image(tmp_path, b"a" * 1000)
    want = hashlib.sha256(b"a" * 1000).hexdigest()
    assert dg.image_sha256(path) == dg.image_sha256(path) == want
    assert len(hashes) == 1
    assert dg.cache_file() == tmp_path / "cache" / "mushin-box" / "image-digests.json"
    assert json.loads(dg.cache_file().read_text())[str(path)]["sha256"] == want


def test_a_rewrite_with_the_same_size_and_mtime_is_hashed_again(
    tmp_path: Path, hashes: list[str]
) -> None:
    path = _image(tmp_path, b"a" * 1000)
    dg.image_sha256(path)
    st = path.stat()
    with open(path, "r+b") as handle:  # in place: the same inode, the same size
        handle.write(b"b")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime forced back
    assert path.stat().st_mtime_ns == st.st_mtime_ns and path.stat().st_ino == st.st_ino
    assert dg.image_sha256(path) == hashlib.sha256(b"b" + b"a" * 999).hexdigest()
    assert len(hashes) == 2


def test_a_touched_or_replaced_image_is_hashed_again(tmp_path: Path, hashes: list[str]) -> None:
    path = _image(tmp_path, b"a" * 1000)
    dg.image_sha256(path)
    path.touch()
    dg.image_sha256(path)
    other = tmp_path / "other.sif"
    other.write_bytes(b"c" * 1000)
    os.replace(other, path)  # a new file under the same name
    assert dg.image_sha256(path) == hashlib.sha256(b"c" * 1000).hexdigest()
    assert len(hashes) == 3


def test_a_corrupt_or_unwritable_cache_only_costs_the_hash(
    tmp_path: Path, hashes: list[str]
) -> None:
    path = _image(tmp_path, b"a" * 10)
    dg.cache_file().parent.mkdir(parents=True)
    dg.cache_file().write_text("{")
    assert dg.image_sha256(path) == hashlib.sha256(b"a" * 10).hexdigest()
    assert dg.image_sha256(path) == hashlib.sha256(b"a" * 10).hexdigest()
    assert len(hashes) == 1  # the corrupt cache was replaced by a good one
    dg.cache_file().unlink()
    dg.cache_file().parent.chmod(0o500)
    try:
        if os.access(dg.cache_file().parent, os.W_OK):
            pytest.skip("root ignores directory permissions")
        assert dg.image_sha256(path) == hashlib.sha256(b"a" * 10).hexdigest()
    finally:
        dg.cache_file().parent.chmod(0o700)


def test_the_first_hash_of_a_large_image_shows_a_progress_bar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(dg, "PROGRESS_ABOVE", 2000)
    monkeypatch.setattr(dg.sys.stderr, "isatty", lambda: True)
    shown: list[tuple[int, bool]] = []
    done: list[int] = []
    real = dg._bar

    def recorded(path: str, size: int, on: bool):  # the real bar, watched
        shown.append((size, on))
        bar = real(path, size, on)
        return _Watched(bar, done)

    monkeypatch.setattr(dg, "_bar", recorded)
    small, large = tmp_path / "small.sif", _image(tmp_path, b"a" * 3000)
    small.write_bytes(b"a" * 10)
    dg.image_sha256(small)
    assert dg.image_sha256(large) == hashlib.sha256(b"a" * 3000).hexdigest()
    dg.image_sha256(large)  # from the cache: no bar
    assert shown == [(10, False), (3000, True)]
    assert sum(done) == 3010


class _Watched:
    """A progress context that also counts the bytes it is told about."""

    def __init__(self, inner: object, done: list[int]) -> None:
        self.inner, self.done = inner, done

    def __enter__(self):
        advance = self.inner.__enter__()  # type: ignore[attr-defined]

        def counted(n: int) -> None:
            self.done.append(n)
            advance(n)

        return counted

    def __exit__(self, *exc: object) -> None:
        self.inner.__exit__(*exc)  # type: ignore[attr-defined]
