# SPDX-License-Identifier: MIT
"""The ranks a local HydraDDP job's rank 0 started: watching them, ending them, and making
them die with rank 0. Rank 0 is often the user's own process: it waits for them in Python
(:func:`wait_ready`), where a signal is heard at once, and enters torch's rendezvous (a C++
wait no signal interrupts) only once every rank said it is joining (:func:`say_ready`).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from mushin_box._core.safeio import read_tail

log = logging.getLogger("mushin_box._train.ddp")  # the messages users know, from HydraDDP


def retire_procs(
    procs: list[subprocess.Popen[bytes]], timeout_s: float, quiet: bool = False
) -> None:
    """End ranks: close their command pipe, wait until ``timeout_s``, kill what is left."""
    deadline = time.monotonic() + timeout_s
    for proc in procs:
        if proc.stdin is not None and not proc.stdin.closed:
            with contextlib.suppress(OSError):
                proc.stdin.close()  # EOF: the child's command loop ends
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            if timeout_s > 0 and not quiet:
                log.warning("HydraDDP: rank pid %s did not exit in time; killing it", proc.pid)
            proc.kill()
            proc.wait()


# in a rank HydraDDP started: the pipe on which it tells rank 0 that it is joining
_ready_fd: int | None = None


def set_ready_fd(fd: int | None) -> None:
    global _ready_fd
    _ready_fd = fd


def say_ready() -> None:
    """In a started rank, once, right before it joins the process group: tell rank 0."""
    global _ready_fd
    fd, _ready_fd = _ready_fd, None
    if fd is not None:
        # rank 0 gone (OSError): the rendezvous fails and says so
        with contextlib.suppress(OSError), open(fd, "wb", buffering=0) as pipe:
            pipe.write(b"r")


def wait_ready(
    procs: list[subprocess.Popen[bytes]], fds: list[int], logs: list[Path], timeout_s: float
) -> None:
    """Rank 0: wait until every started rank said it is joining (one byte on its pipe), in
    a loop that a signal interrupts at once; closes ``fds``. ``RuntimeError`` when a rank
    exited before it joined (its pipe closed empty) or ``timeout_s`` passed."""
    pending = dict(zip(fds, range(len(fds)), strict=True))
    deadline = time.monotonic() + timeout_s
    try:
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                ranks = ", ".join(str(i + 1) for i in pending.values())
                raise RuntimeError(
                    f"HydraDDP: rank(s) {ranks} did not start within {timeout_s:g} s (the "
                    f"strategy's timeout); their logs are in {logs[0].parent}"
                )
            readable, _, _ = select.select(list(pending), [], [], min(left, 1.0))
            for fd in readable:
                said = os.read(fd, 1)
                i = pending.pop(fd)
                os.close(fd)
                if not said:  # the pipe closed empty: the rank ended before joining
                    try:
                        code: int | str | None = procs[i].wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        code = "unknown"
                    raise RuntimeError(
                        f"HydraDDP: rank {i + 1} (pid {procs[i].pid}) exited with status "
                        f"{code} before joining the process group; see {logs[i]}"
                    )
    finally:
        for fd in pending:
            os.close(fd)


class ChildObserver(threading.Thread):
    """When a started rank dies with an error, kills the others, then rank 0 itself if it has
    not failed within ``grace_s`` (not waiting the backend's 30 minutes in a collective).
    Stoppable, unlike Lightning's, so the sweep driver survives a failed cell."""

    period_s = 0.5
    grace_s = 30.0

    def __init__(self, procs: list[subprocess.Popen[bytes]], logs: list[Path]) -> None:
        super().__init__(daemon=True, name="mushin-ddp-observer")
        self._procs = procs
        self._logs = logs
        self._stop_event = threading.Event()

    def stop(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        while not self._stop_event.wait(self.period_s):
            codes = [p.poll() for p in self._procs]
            if all(c == 0 for c in codes):
                return
            bad = [
                (p.pid, c) for p, c in zip(self._procs, codes, strict=True) if c not in (None, 0)
            ]
            if not bad:
                continue
            log.error(
                "HydraDDP: rank process(es) (pid, exit code) %s failed; ending the others", bad
            )
            for proc, path in zip(self._procs, self._logs, strict=False):
                if proc.poll() not in (None, 0):  # its own words, where the user looks
                    sys.stderr.write(f"HydraDDP: the end of {path}:\n{_log_tail(path)}\n")
            for p in self._procs:
                if p.poll() is None:
                    p.kill()
            if not self._stop_event.wait(self.grace_s):
                log.error("HydraDDP: rank 0 is still waiting on the failed ranks; killing it")
                os.kill(os.getpid(), signal.SIGKILL)
            return


def _log_tail(path: Path) -> str:
    """The last 20 lines of a rank's log, or why it was not read (a link planted in its place)."""
    try:
        text = read_tail(path, 16384)[0].decode("utf-8", "replace")
    except OSError as exc:  # UnsafeFileError too
        return f"(not read: {exc})"
    return "\n".join(text.splitlines()[-20:])


def die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: the child gets SIGKILL when rank 0 dies, even by SIGKILL (no orphans)."""
    with contextlib.suppress(OSError):  # the child's own parent watchdog still applies
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
