# SPDX-License-Identifier: MIT
"""The cyclic garbage collector paused while a sweep's records are read in bulk.

A million small containers that live on, rescanned every 700 new ones for nothing (JSON
values form no cycle: docs/performance.md); never paused around a user's task.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block (nested blocks are fine).

    >>> import gc
    >>> with gc_paused():
    ...     gc.isenabled()
    False
    >>> gc.isenabled()
    True
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
