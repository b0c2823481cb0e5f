# SPDX-License-Identifier: MIT
"""The cyclic garbage collector paused while a sweep's records are read in bulk.

Design note: reading 10,000 cells builds about a million small dicts and lists that all live
on. CPython's collector runs every 700 net new containers and rescans the survivors: for a
bulk load, work that finds nothing, since JSON values cannot form a cycle (docs/performance.md
has the cost). Pausing is the remedy the collector's own documentation offers; it is scoped
to the reading, never around a user's task, and leaves the collector as the caller had it.
Cyclic garbage made meanwhile is collected at the collector's next run.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block (nested blocks are fine).

    Examples
    --------
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
