# SPDX-License-Identifier: MIT
"""The error root: every error the kit raises on purpose is a :class:`MushinBoxError`.

A caller catches the kit's refusals with one ``except MushinBoxError`` and tells them from a bug
in the kit (any other exception). Each concrete class also keeps its built-in parent
(``ValueError`` for bad input, ``RuntimeError`` for a state of the world, ``OSError`` for a
file), so code that caught the built-in before keeps working.

The CLI turns a ``MushinBoxError`` into one line and exit status 2 in one place; rooms raise
values that carry their data and name the fix in the kit's own terms, never a CLI flag.

Examples
--------
>>> class ExampleError(MushinBoxError, ValueError):
...     pass
>>> isinstance(ExampleError("bad"), ValueError)
True
"""

from __future__ import annotations

__all__ = ["MushinBoxError"]


class MushinBoxError(Exception):
    """Root of every error mushin-box raises on purpose; the message names the fix."""
