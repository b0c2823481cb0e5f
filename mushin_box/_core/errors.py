# SPDX-License-Identifier: MIT
"""The error root: every error the kit raises on purpose is a :class:`MushinBoxError`.

Any other exception is a bug; each class keeps its built-in parent too (``ValueError``...).
The CLI turns one into one line and exit status 2. A fix is never named as a CLI flag: an
argument of the call is a ``{name}`` field of the message, its value in ``arguments``, that
``str(error)`` spells as Python (``allow_dirty=True``), :meth:`MushinBoxError.worded` as the
CLI does (``--allow-dirty``).

>>> class ExampleError(MushinBoxError, ValueError):
...     pass
>>> isinstance(ExampleError("bad"), ValueError)
True
>>> error = ExampleError("dirty tree: pass {allow_dirty} to run anyway",
...                      arguments={"allow_dirty": True})
>>> str(error)
'dirty tree: pass allow_dirty=True to run anyway'
>>> error.worded(lambda name, value: "--" + name.replace("_", "-"))
'dirty tree: pass --allow-dirty to run anyway'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from mushin_box._core.targets import public


def python_argument(name: str, value: object) -> str:
    """An argument as a Python call writes it: ``name=value``."""
    return f"{name}={value}"


@public
class MushinBoxError(Exception):
    """Root of every error mushin-box raises on purpose; the message names the fix.

    ``arguments``: the call's arguments that the message names as ``{name}`` fields (the fix
    "pass ``{image}``"), each with the value to show (``True`` for a switch).
    """

    def __init__(self, *args: object, arguments: Mapping[str, object] | None = None) -> None:
        super().__init__(*args)
        self.arguments: dict[str, object] = dict(arguments or {})

    def worded(self, spell: Callable[[str, object], str] = python_argument) -> str:
        """The message, each named argument written by ``spell(name, value)``."""
        text = super().__str__()
        for name, value in self.arguments.items():
            text = text.replace("{" + name + "}", spell(name, value))
        return text

    def __str__(self) -> str:
        return self.worded()


@public
class CellWarning(UserWarning):
    """A sweep's cell did not complete (failed, timed out, was cancelled or skipped): said
    once by ``Workflow.run`` after the launch. A category of its own, so that a caller who
    reports the cells itself (the command line's summary) can leave it out."""
