# SPDX-License-Identifier: MIT
"""SIGTERM as a cell sees it: while a cell's task runs on this host
(:func:`sigterm_raises`), SIGTERM raises :class:`Terminated`, a ``SystemExit`` (status 143,
as the shell reports it) that no ``except Exception`` swallows, so the cell is recorded
``cancelled``, not left ``running`` (and a local HydraDDP job's ranks not left behind).
Under SLURM the scheduler owns SIGTERM: nothing changes there. Python drops an exception
raised where nothing can catch it (an at-fork hook, a ``__del__``, a weakref callback):
such a drop sends the signal again, from a thread, to be heard where it can unwind.

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


# the hook below is running: it checks no signal after clearing this, so the handler sees
# it set exactly while a raise would be lost
_in_hook = False


def _send_again(signum: int) -> None:
    threading.Timer(0.05, os.kill, (os.getpid(), signum)).start()


def _resending(previous: Callable[[Any], object]) -> Callable[[Any], None]:
    """An unraisable hook that sends a dropped :class:`Terminated`'s signal again and hands
    anything else to ``previous``."""

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
