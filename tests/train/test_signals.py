# SPDX-License-Identifier: MIT
"""SIGTERM unwinds a cell's task even when its handler first runs where Python drops
exceptions: an at-fork hook (``logging`` releases its lock after every
``subprocess.Popen`` with a ``preexec_fn``), a ``__del__``, a weakref callback. A local
2-rank run used to go on as if no SIGTERM had come when it arrived while rank 0 forked
rank 1."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from mushin_box._train.signals import Terminated, sigterm_raises


class SignalsWhenDropped:
    """Sends SIGTERM from ``__del__``: the handler runs inside it, where a raise is lost."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGTERM)


def _wait_to_be_stopped(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_sigterm_dropped_inside_del_still_unwinds_the_block() -> None:
    with sigterm_raises(environ={}), pytest.raises(Terminated) as stopped:
        dropped = SignalsWhenDropped()
        del dropped
        _wait_to_be_stopped(5.0)
    assert stopped.value.code == 128 + signal.SIGTERM


FORK_SCRIPT = """
import os, signal, subprocess, sys, time
from mushin_box._train.signals import Terminated, sigterm_raises

# the handler runs inside this after-fork hook, where Python drops what it raises
os.register_at_fork(after_in_parent=lambda: os.kill(os.getpid(), signal.SIGTERM))
try:
    with sigterm_raises(environ={}):
        subprocess.run([sys.executable, "-c", "pass"], preexec_fn=lambda: None)
        time.sleep(5)
except Terminated:
    print("unwound")
"""


def test_a_sigterm_heard_during_a_fork_still_unwinds_the_block() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", FORK_SCRIPT], capture_output=True, text=True, timeout=60
    )
    assert proc.stdout.strip() == "unwound", proc.stderr[-2000:]


def test_other_unraisable_exceptions_still_reach_the_previous_hook(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[type[BaseException] | None] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_type))

    class Fails:
        def __del__(self) -> None:
            raise KeyError("boom")

    with sigterm_raises(environ={}):
        failing = Fails()
        del failing
    assert seen == [KeyError]
