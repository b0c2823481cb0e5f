# SPDX-License-Identifier: MIT
"""A local launch on a terminal stays readable: rank 0's output (Lightning logs through
handlers made before the bar) is printed above the progress bar, never glued to it,
Lightning's per-cell notices are left out, and the ETA comes from the finished cells."""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from conftest import REPO

from mushin_box._sweepdir.progress import NOTICES

pytestmark = pytest.mark.slow

_ANSI = re.compile(r"\x1b\[[0-9;?]*[a-zA-Z]")
#: a frame of the bar: nothing after its counts (``pending=1 running=1``)
_FRAME = re.compile(r"^cells [━╺╸ ]*\d+/\d+ \d+:\d\d:\d\d eta (\S+) *((?:[a-z]+=\d+ ?)*)$")


def _run_on_a_terminal(argv: list[str], timeout_s: float) -> tuple[int, str]:
    """Run ``argv`` with a pseudo-terminal (100 columns) as its stdout and stderr; its
    exit code and all it wrote."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    env["TERM"] = "xterm-256color"
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, cwd=REPO, env=env
    )
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # the other end closed: it exited
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return code, b"".join(chunks).decode("utf-8", errors="replace")


def test_a_local_launch_keeps_the_progress_bar_whole(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "mushin_box", "launch", "examples/exp.py", "--local"]
    argv += ["--gpus", "2", "--working-dir", str(tmp_path / "sweep"), "module.lr=0.01,0.1"]
    code, out = _run_on_a_terminal(argv, timeout_s=500)
    plain = _ANSI.sub("", out)
    assert code == 0, plain[-3000:]
    pieces = [p for p in re.split(r"\r\n|\r|\n", plain) if p.strip()]
    frames = [p for p in pieces if p.startswith("cells ")]
    assert frames, plain[-3000:]
    broken = [f for f in frames if not _FRAME.match(f.rstrip())]
    assert not broken, broken[:5]  # e.g. "... running=1Initializing distributed: ..."
    # rank 0's lines are printed, on lines of their own
    assert any("HydraDDP: the output of rank 1 goes to" in p for p in pieces), plain[-3000:]
    said = [p for p in pieces if p.lstrip("-").strip().startswith(NOTICES)]
    assert not said, said[:5]  # Lightning's per-cell notices are left out
    assert "The `srun` command is available" not in plain
    assert "`isinstance(treespec, LeafSpec)` is deprecated" not in plain
    # once a cell finished, the ETA is a time, not -:--:--
    after_one = [_FRAME.match(f.rstrip()) for f in frames if "completed=1" in f]
    assert after_one and all(m and m.group(1) != "-:--:--" for m in after_one), after_one[:3]


def test_without_the_bar_lightnings_notices_are_left_out_too(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "mushin_box", "launch", "examples/exp.py", "--local"]
    argv += ["--no-progress", "--working-dir", str(tmp_path / "sweep"), "trainer.max_epochs=1"]
    code, out = _run_on_a_terminal(argv, timeout_s=300)
    plain = _ANSI.sub("", out)
    assert code == 0, plain[-3000:]
    pieces = [p for p in re.split(r"\r\n|\r|\n", plain) if p.strip()]
    said = [p for p in pieces if p.lstrip("-").strip().startswith(NOTICES)]
    assert not said, said[:5]
    assert "`isinstance(treespec, LeafSpec)` is deprecated" not in plain
    assert any(p.startswith("  completed cell  train_loss=") for p in pieces), plain[-3000:]
