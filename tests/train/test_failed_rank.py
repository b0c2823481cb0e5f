# SPDX-License-Identifier: MIT
"""A rank that HydraDDP started fails: the others are ended at once, and the failed rank's
own last lines are printed where the user looks (rank 0's stderr), read from the end of its
log however large it grew, and never through a link planted in its place."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from mushin_box._core.safeio import UnsafeFileError
from mushin_box._train.ranks import ChildObserver


def _observe(procs: list[subprocess.Popen[bytes]], logs: list[Path]) -> None:
    observer = ChildObserver(procs, logs)
    observer.grace_s = 600.0  # rank 0 is this test: it is never killed, only stopped
    observer.start()
    deadline = time.monotonic() + 60
    while procs[0].poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    observer.stop()
    observer.join(10)


def test_a_failed_rank_ends_the_others_and_its_last_lines_are_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = [tmp_path / "rank1.log", tmp_path / "rank2.log"]
    fail = "import sys; [print('line', i) for i in range(5000)]; sys.exit(3)"
    with open(logs[1], "wb") as out:
        procs = [
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]),
            subprocess.Popen([sys.executable, "-c", fail], stdout=out),
        ]
    _observe(procs, logs)
    assert procs[0].poll() is not None  # ended, not left waiting in a collective
    err = capsys.readouterr().err
    assert f"HydraDDP: the end of {logs[1]}:" in err and "line 4999" in err
    assert "line 4979" not in err and "line 4980" in err  # its last 20 lines


def test_a_link_planted_as_the_failed_ranks_log_is_not_followed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = tmp_path / "elsewhere.txt"
    secret.write_text("not the rank's words\n")
    logs = [tmp_path / "rank1.log", tmp_path / "rank2.log"]
    logs[1].symlink_to(secret)
    procs = [
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]),
        subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"]),
    ]
    _observe(procs, logs)
    err = capsys.readouterr().err
    assert f"HydraDDP: the end of {logs[1]}:" in err and "not the rank's words" not in err
    assert "(not read: " in err  # the empty tail says why


@pytest.mark.parametrize("link", ["log", "folder"])
def test_a_link_planted_as_a_ranks_log_is_not_followed_when_the_rank_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, link: str
) -> None:
    from unittest import mock

    from lightning_fabric.plugins.environments.lightning import LightningEnvironment

    import mushin_box._train.ddp as ddp

    for name in ("LOCAL_RANK", "NODE_RANK", "GROUP_RANK"):
        monkeypatch.delenv(name, raising=False)
    secret = tmp_path / "elsewhere" / "rank1.log"
    secret.parent.mkdir()
    (tmp_path / "job").mkdir()
    if link == "log":
        (tmp_path / "job" / "logs").mkdir()
        (tmp_path / "job" / "logs" / "rank1.log").symlink_to(secret)
    else:
        (tmp_path / "job" / "logs").symlink_to(secret.parent)
    popen = mock.Mock()
    monkeypatch.setattr(subprocess, "Popen", popen)
    monkeypatch.setattr(ddp, "ChildObserver", mock.Mock())
    launcher = ddp.launcher_classes("pytorch_lightning")[1](LightningEnvironment(), 2, 1)
    with pytest.raises(UnsafeFileError, match=r"rank1.log: it or its folder is a symbolic link"):
        launcher._spawn_children({"job_dir": str(tmp_path / "job"), "cwd": str(tmp_path)})
    assert not secret.exists() and not popen.called  # nothing written through the link
