# SPDX-License-Identifier: MIT
"""Everything a command prints passes here: redacted on its way out, and a failure to
write it (a full disk, a closed pipe) told apart from the command's answer.

One choke point, because secrets reached the terminal through messages nobody thought of
as output (Hydra quoting an override back, argparse a bad flag): ``sys.stdout``/``stderr``
are wrapped while a command runs (child processes are not covered). A failed write raises
:class:`OutputError`, not an ``OSError`` a command's own handler would swallow.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TextIO, cast

from mushin_box._core.errors import MushinBoxError

#: the help of every ``--json`` flag: what a script gets where JSON has no number
JSON_HELP = (
    "print machine-readable JSON (strict: a number that is not finite, a NaN metric, is the "
    'string "nan", "inf" or "-inf")'
)

#: every C0 and C1 control character and DEL as ``\xNN`` (a newline ``\n``, a tab ``\t``, a
#: carriage return ``\r``), and the Unicode line breaks and direction overrides as ``\uNNNN``
_ESCAPES = (
    {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))}
    | {ord("\n"): "\\n", ord("\t"): "\\t", ord("\r"): "\\r"}
    | {c: f"\\u{c:04x}" for c in (0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A))}
)


def shown(text: object) -> str:
    """``text`` for one line of the terminal, every control character as its escape.

    Every name or string read from a sweep directory is printed through here: whoever can
    write there chooses it, and raw, a newline forges a line of the command's answer and
    an escape sequence moves the cursor. A backslash is kept as it is.

    >>> shown("lr=1.0\\nFAKE completed lr=99"), shown("..\\x1b[31mred")
    ('lr=1.0\\\\nFAKE completed lr=99', '..\\\\x1b[31mred')
    """
    text = str(text)
    return text if text.isprintable() else text.translate(_ESCAPES)  # most names: as they are


class OutputError(MushinBoxError):
    """Writing to ``stream`` (``"stdout"`` or ``"stderr"``) failed with ``error``."""

    def __init__(self, stream: str, error: OSError) -> None:
        super().__init__(f"{stream}: {error}")
        self.stream = stream
        self.error = error

    @property
    def closed_pipe(self) -> bool:
        """The reader went away (``| head``): an end, not an error."""
        return isinstance(self.error, BrokenPipeError) or self.error.errno == errno.EPIPE


class _Redacted:
    """A text stream that cleans what is written to it, and names the stream that failed."""

    def __init__(self, stream: TextIO, clean: Callable[[str], str], name: str) -> None:
        self._stream = stream
        self._clean = clean
        self._name = name

    def write(self, text: str) -> int:
        try:
            self._stream.write(self._clean(text))
        except OSError as exc:
            raise OutputError(self._name, exc) from None
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise OutputError(self._name, exc) from None

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding...: the stream's
        return getattr(self._stream, name)


@contextlib.contextmanager
def redacted_output(argv: Sequence[str]) -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` cleaned of the secrets of ``argv`` and the rule's."""
    from mushin_box._core.redact import TextRedactor, command_line_secrets

    clean = TextRedactor(command_line_secrets(argv), lenient=True)
    out, err = sys.stdout, sys.stderr
    if clean.problem is not None:  # said once, as the command starts
        print(
            f"mushin-box: warning: {clean.problem}; secrets are found by the built-in rule only",
            file=err,
        )
    sys.stdout = cast(TextIO, _Redacted(out, clean, "stdout"))
    sys.stderr = cast(TextIO, _Redacted(err, clean, "stderr"))
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err


def silence(stream: TextIO) -> None:
    """Point a failed stream's descriptor at /dev/null: Python's flush at exit then neither
    fails again nor prints a traceback."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        fd = stream.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)


def strict_json(value: Any) -> Any:
    """``value`` with each nan or inf float as a string: Python's ``json`` writes bare
    ``NaN``, which strict parsers (``jq``, JavaScript, Go) refuse."""
    import math

    if isinstance(value, float) and not math.isfinite(value):
        return str(float(value))
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict_json(v) for v in value]
    return value


def print_json(value: Any) -> None:
    """``value`` on stdout as strict JSON, indented, keys sorted; a value JSON has no type
    for (a path, a numpy float32) as its ``str``, which is never a bare NaN."""
    import json

    text = json.dumps(strict_json(value), indent=2, sort_keys=True, default=str, allow_nan=False)
    sys.stdout.write(text + "\n")
