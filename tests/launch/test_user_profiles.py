# SPDX-License-Identifier: MIT
"""A user's own profiles (``$XDG_CONFIG_HOME/mushin-box/profiles.toml``) rank below the
project's: each key comes from the project when it sets it, else from the user's file."""

from __future__ import annotations

from pathlib import Path

import pytest

from mushin_box._launch.options import load_profile, resolve_options, user_profile_file

pytestmark = pytest.mark.floor  # the floor job's subset (scripts/floor)

PROJECT = """
[tool.mushin-box.profiles.default]
partition = "gpu"
time = "2:00:00"
"""
USER = """
[profiles.default]
partition = "mine"
account = "proj42"

[profiles.big]
partition = "bigmem"
"""


@pytest.fixture
def user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    config = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    path = config / "mushin-box" / "profiles.toml"
    path.parent.mkdir(parents=True)
    path.write_text(USER)
    return path


def test_the_user_file_honours_xdg_config_home(user: Path) -> None:
    assert user_profile_file() == user


def test_the_projects_keys_win_and_the_users_fill_in(user: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(PROJECT)
    profile = load_profile(None, project)
    assert profile is not None
    assert dict(profile.values) == {"partition": "gpu", "time": 120, "account": "proj42"}
    opts = resolve_options({}, None, default_name="exp", cwd=project)
    assert opts.slurm.account == "proj42" and opts.slurm.partition == "gpu"
    assert str(user) in opts.slurm.sources["account"]
    # a flag still wins over both
    opts = resolve_options({"account": "other"}, None, default_name="exp", cwd=project)
    assert opts.slurm.account == "other"


def test_each_keys_source_names_the_one_file_that_set_it(user: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(PROJECT)
    sources = resolve_options({}, None, default_name="exp", cwd=project).slurm.sources
    assert sources["account"] == f"profile default ({user})"  # only the user's sets it
    assert sources["partition"] == f"profile default ({project / 'pyproject.toml'})"
    assert sources["timeout_min"] == f"profile default ({project / 'pyproject.toml'})"


def test_a_profile_only_the_user_has_is_found(user: Path, tmp_path: Path) -> None:
    profile = load_profile("big", tmp_path)  # no project at all
    assert profile is not None and dict(profile.values) == {"partition": "bigmem"}
    with pytest.raises(ValueError, match=r"did you mean 'big'\?"):
        load_profile("bgi", tmp_path)


def test_without_a_user_file_nothing_changes(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "empty"))
    assert load_profile(None, tmp_path) is None


def test_a_bad_user_file_is_one_line_naming_it(user: Path, tmp_path: Path) -> None:
    user.write_text("[profiles.default]\npartiton = 'x'\n")
    with pytest.raises(ValueError, match=r"profiles\.toml: profile default: unknown key"):
        load_profile(None, tmp_path)
