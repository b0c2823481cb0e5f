# SPDX-License-Identifier: MIT
"""Put ``os.environ`` back as it was: around a whole in-process cell, or around a few names.

What an in-process cell's Lightning, seeding or DDP set (``PL_GLOBAL_SEED``, ``MASTER_PORT``)
would make the next cell run, and record, an environment no fresh process has.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping


def restore_environ(saved: Mapping[str, str | None]) -> None:
    """Set each name back to its saved value; ``None`` means it was not set (removed).

    >>> os.environ["MUSHIN_DOCTEST_X"] = "changed"
    >>> restore_environ({"MUSHIN_DOCTEST_X": None})
    >>> "MUSHIN_DOCTEST_X" in os.environ
    False
    """
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        elif os.environ.get(key) != value:
            os.environ[key] = value


@contextlib.contextmanager
def environ_set(values: Mapping[str, str]) -> Iterator[None]:
    """Set ``values`` in ``os.environ`` for the block, then restore those names only
    (what the block set under other names stays).

    >>> with environ_set({"MUSHIN_DOCTEST_Y": "1"}):
    ...     os.environ["MUSHIN_DOCTEST_Y"]
    '1'
    >>> "MUSHIN_DOCTEST_Y" in os.environ
    False
    """
    saved = {key: os.environ.get(key) for key in values}
    try:
        os.environ.update(values)
        yield
    finally:
        restore_environ(saved)


@contextlib.contextmanager
def environ_restored() -> Iterator[None]:
    """Run the block, then make ``os.environ`` exactly what it was before it: names the
    block added are removed, names it changed or removed are put back.

    >>> with environ_restored():
    ...     os.environ["PL_GLOBAL_SEED"] = "3"
    >>> "PL_GLOBAL_SEED" in os.environ
    False
    """
    saved = dict(os.environ)
    try:
        yield
    finally:
        restore_environ({key: None for key in os.environ if key not in saved})
        restore_environ(saved)
