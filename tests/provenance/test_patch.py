# SPDX-License-Identifier: MIT
"""What a dirty launch keeps of its uncommitted code (``_provenance.patch``): bounded, and
nothing that holds a secret or touches a secret file."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from mushin_box._provenance import patch as kept
from mushin_box._provenance.record import experiment_state

GIT = ("git", "-c", "user.name=t", "-c", "user.email=t@t")


def _dirty(tmp_path: Path, name: str, text: str) -> Path:
    (tmp_path / "exp.py").write_text("x = 1\n")
    (tmp_path / name).write_text("a: 1\n")
    for step in (("init", "-q"), ("add", "."), ("commit", "-qm", "c")):
        subprocess.run([*GIT, *step], cwd=tmp_path, check=True, capture_output=True)
    (tmp_path / name).write_text(text)
    return tmp_path / "exp.py"


def test_a_diff_over_the_limit_is_not_kept_and_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exp = _dirty(tmp_path, "exp.py", "x = 2\n" * 40)
    monkeypatch.setattr(kept, "PATCH_LIMIT", 100)
    patch = kept.code_patch(exp)
    assert patch is not None and patch.refused is not None and "MiB kept" in patch.refused
    out = kept.keep_patch(tmp_path / "sweep", experiment_state(exp, print))
    assert out is not None and "patch" not in out
    assert not (tmp_path / "sweep").exists()


@pytest.mark.parametrize("name", [".env", "conf/.env.local", "secrets.yaml", "tls.pem"])
def test_a_change_to_a_secret_file_is_not_kept(tmp_path: Path, name: str) -> None:
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    exp = _dirty(tmp_path, name, "a: 2\n")
    patch = kept.code_patch(exp)
    assert patch is not None and patch.refused == (
        f"they change {name}, whose name is a secret file's"
    )


def test_a_clean_diff_is_kept_owner_only_under_its_hash(tmp_path: Path) -> None:
    exp = _dirty(tmp_path, "exp.py", "x = 2\n")
    out = kept.keep_patch(tmp_path / "sweep", experiment_state(exp, print))
    assert out is not None
    sha = out["git"]["diff_sha256"]
    assert out["patch"] == f".mushin/code/{sha}.patch"
    assert (tmp_path / "sweep" / out["patch"]).stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("link", [".mushin", ".mushin/code"])
def test_a_symlinked_directory_in_the_sweep_is_not_followed(tmp_path: Path, link: str) -> None:
    """The sweep sits on a shared filesystem: a ``.mushin`` (or its ``code``) that is a link
    elsewhere gets no copy of the user's code; the launch goes on without one."""
    exp = _dirty(tmp_path, "exp.py", "x = 2\n")
    sweep, elsewhere = tmp_path / "sweep", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (sweep / link).parent.mkdir(parents=True, exist_ok=True)
    (sweep / link).symlink_to(elsewhere)
    out = kept.keep_patch(sweep, experiment_state(exp, print))
    assert out is not None and "patch" not in out
    assert list(elsewhere.rglob("*")) == []


def test_a_resume_of_the_same_tree_rewrites_no_copy_and_a_changed_one_is_made_whole(
    tmp_path: Path,
) -> None:
    exp = _dirty(tmp_path, "exp.py", "x = 2\n")
    out = kept.keep_patch(tmp_path / "sweep", experiment_state(exp, print))
    assert out is not None
    copy = tmp_path / "sweep" / out["patch"]
    data, first = copy.read_bytes(), copy.stat()
    kept.keep_patch(tmp_path / "sweep", experiment_state(exp, print))  # a resume
    again = copy.stat()
    assert (again.st_ino, again.st_mtime_ns) == (first.st_ino, first.st_mtime_ns)
    for damage in ("bytes", "mode"):  # anything but the owner-only bytes: written again
        if damage == "bytes":
            copy.write_bytes(data + b"+tampered\n")
        else:
            copy.chmod(0o644)
        kept.keep_patch(tmp_path / "sweep", experiment_state(exp, print))
        assert copy.read_bytes() == data and copy.stat().st_mode & 0o777 == 0o600, damage
