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

Python drops an exception raised where nothing can catch it: in an at-fork hook (the
``logging`` lock released after every ``subprocess.Popen`` with a ``preexec_fn``), a
``__del__`` or a weakref callback, all of which run Python code at points where the
handler may run. A :class:`Terminated` dropped there would leave the process running as
if no SIGTERM had come, so while the block runs such a drop sends the signal again, from
a thread, to be heard at the next point where it can unwind the task.

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
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import FrameType
from typing import Any

__all__ = ["Terminated", "sigterm_raises"]


class Terminated(SystemExit):
    """Raised in a cell's process by SIGTERM (see module doc)."""

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        super().__init__(128 + int(signum))
        self.signum = int(signum)

    def __str__(self) -> str:
        return f"stopped by signal {signal.Signals(self.signum).name}"


def _raise(signum: int, frame: FrameType | None) -> None:
    if _in_hook:  # a raise inside the unraisable hook would be dropped as well
        _send_again(signum)
        return
    raise Terminated(signum)


_in_hook = False  # the hook below is running (it calls nothing that checks signals after
# clearing it, so the handler sees it set exactly while a raise would be lost)


def _send_again(signum: int) -> None:
    threading.Timer(0.05, os.kill, (os.getpid(), signum)).start()


def _resending(previous: Callable[[Any], object]) -> Callable[[Any], None]:
    """An unraisable hook that sends a dropped :class:`Terminated`'s signal again, to be
    heard once the code that dropped it has returned, and hands anything else to
    ``previous``."""

    def hook(unraisable: Any) -> None:
        global _in_hook
        _in_hook = True
        try:
            if isinstance(unraisable.exc_value, Terminated):
                _send_again(unraisable.exc_value.signum)
            else:
                previous(unraisable)
        finally:
            _in_hook = False

    return hook


@contextmanager
def sigterm_raises(environ: Mapping[str, str] | None = None) -> Iterator[None]:
    """While the block runs: SIGTERM raises :class:`Terminated` (main thread, not under
    SLURM; elsewhere a no-op). The previous handler comes back afterwards."""
    env = os.environ if environ is None else environ
    if threading.current_thread() is not threading.main_thread() or env.get("SLURM_JOB_ID"):
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    previous_hook = sys.unraisablehook
    sys.unraisablehook = _resending(previous_hook)
    signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
        sys.unraisablehook = previous_hook
