# SPDX-License-Identifier: MIT
"""One way to run an outside tool for a bounded time: :func:`run_bounded`; and :func:`git`.

A tool (``mmdebstrap``, ``apptainer build``) may start children and outlive a timeout or a
^C. So it runs in its own process group, stopped whole (``SIGTERM``, then ``SIGKILL``) on a
timeout or any exception while it runs: nothing keeps writing after the kit gave up.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path

_GRACE_S = 10.0  # after SIGTERM, before SIGKILL


def run_bounded(
    argv: Sequence[str],
    *,
    timeout: float,
    capture: bool,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    tail: int = 0,
    pass_fds: Sequence[int] = (),
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in its own process group, stopped whole past ``timeout`` seconds.

    ``capture``: return its stdout and stderr. Else its output goes to this process's stderr
    as it comes, its last ``tail`` lines also the result's ``stderr``.

    >>> run_bounded(["echo", "hi"], timeout=10, capture=True).stdout
    'hi\\n'
    """
    piped = capture or tail > 0
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=None if env is None else dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if piped else None,
        stderr=subprocess.PIPE if capture else (subprocess.STDOUT if piped else None),
        text=True,
        errors="replace",
        pass_fds=tuple(pass_fds),
        start_new_session=True,
    )
    kept: deque[str] = deque(maxlen=max(tail, 1))
    pump = None
    if piped and not capture:
        pump = threading.Thread(target=_tee, args=(proc, kept), daemon=True)
        pump.start()
    try:
        if pump is None:
            stdout, stderr = proc.communicate(timeout=timeout)
        else:
            proc.wait(timeout=timeout)
            pump.join(timeout=_GRACE_S)
            stdout, stderr = None, "".join(kept)
    except BaseException:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=_GRACE_S)
                break
        raise
    return subprocess.CompletedProcess(list(argv), proc.returncode, stdout, stderr)


def _tee(proc: subprocess.Popen[str], kept: deque[str]) -> None:
    """Pass the tool's output on, line by line, and keep reading it when this process's
    stderr is gone (a tool whose pipe fills would block for good)."""
    assert proc.stdout is not None
    shown = True
    for line in proc.stdout:
        kept.append(line)
        if shown:
            try:
                sys.stderr.write(line)
                sys.stderr.flush()
            except (OSError, ValueError):
                shown = False


def git(args: Sequence[str], cwd: Path, *, timeout: float = 10.0) -> str | None:
    """``git ARGS``' output in ``cwd``, or None when it fails, times out or cannot run. Read
    as bytes, decoded after: a diff's line ends stay as they are, which its hash needs."""
    try:
        out = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, timeout=timeout, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.decode("utf-8", "replace")
