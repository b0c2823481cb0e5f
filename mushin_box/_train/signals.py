# SPDX-License-Identifier: MIT
"""SIGTERM as a cell sees it: an exception that unwinds the task, so that the cell is
recorded ``cancelled`` and its process ends, instead of a process killed mid-write.

``kill``, ``timeout``, systemd and CI runners stop a process with SIGTERM. Python's default
is to die at once, which leaves the cell's status at ``running`` and, under a local
HydraDDP job, its other ranks behind. While a cell's task runs on this host
(:func:`sigterm_raises`), SIGTERM raises :class:`Terminated` instead: a ``SystemExit``
(exit status 128 + 15, as the shell reports a process killed by SIGTERM) so that no
``except Exception`` in user code swallows it and no traceback is printed, and the cell
runner records it before it leaves. Under SLURM the scheduler owns SIGTERM (time limits,
preemption, ``scancel``; the job's state says which), so nothing is changed there.

Examples
--------
>>> import os, signal
>>> with sigterm_raises(environ={}):
...     try:
...         os.kill(os.getpid(), signal.SIGTERM)
...     except Terminated as exc:
...         print(exc.code, exc.signum)
143 15
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import FrameType

__all__ = ["Terminated", "sigterm_raises"]


class Terminated(SystemExit):
    """Raised in a cell's process by SIGTERM (see module doc)."""

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        super().__init__(128 + int(signum))
        self.signum = int(signum)

    def __str__(self) -> str:
        return f"stopped by signal {signal.Signals(self.signum).name}"


def _raise(signum: int, frame: FrameType | None) -> None:
    raise Terminated(signum)


@contextmanager
def sigterm_raises(environ: Mapping[str, str] | None = None) -> Iterator[None]:
    """While the block runs: SIGTERM raises :class:`Terminated` (main thread, not under
    SLURM; elsewhere a no-op). The previous handler comes back afterwards."""
    env = os.environ if environ is None else environ
    if threading.current_thread() is not threading.main_thread() or env.get("SLURM_JOB_ID"):
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
