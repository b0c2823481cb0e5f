# SPDX-License-Identifier: MIT
"""Evaluate an Apptainer ``--env-file`` by the rules bash and Apptainer's evaluator share.

Apptainer does not give an env file to bash: it evaluates it with an embedded Go shell
interpreter (allexport on; the host environment visible but not exported; command
execution and file opens disabled). That interpreter and bash disagree on some words: it
keeps a backslash outside double quotes, so ``A='it'\\''s'`` arrives as ``it\\'s`` (bash:
``it's``) and ``B=a\\\\b`` as ``a\\\\b``. A test that evaluates the file with bash would
therefore hide exactly the bugs that break a real launch.

This module accepts only the words on which the two agree and REFUSES everything else
(:class:`EnvFileError`, naming the line), so bash's forgiveness can no longer hide a bug.
Accepted, one statement per line:

* blank lines and ``#`` comment lines;
* ``NAME=WORD`` or ``export NAME=WORD``, where WORD is a concatenation, without whitespace,
  of

  - single-quoted literals ``'...'`` (no escapes inside; may span lines),
  - the double-quoted single quote ``"'"``,
  - references ``${NAME:?}`` and ``${NAME:-DEFAULT}`` (DEFAULT made of safe characters,
    possibly empty), bare or alone inside double quotes (``"${NAME:?}"``; several
    references may share one pair of double quotes),
  - unquoted runs of safe characters ``[A-Za-z0-9_.,:/@%+=-]``.

Refused, among others: a backslash outside single quotes, ``$(``, backticks, ``$NAME``,
``${NAME}``, unquoted whitespace or other characters, any other double-quoted content, a
carriage return or NUL anywhere, an unterminated quote.

References see, first, the variables assigned earlier in the file (allexport), then the
host environment; ``${1:?}``... see ``args``. ``${NAME:?}`` with NAME unset or empty fails
the evaluation the way Apptainer reports it: the interpreter prints ``NAME: `` and the
evaluation ends with "exit status 1" (:attr:`EnvFileError.printed`,
:attr:`EnvFileError.exit_status`).

Pure standard library: the Apptainer stand-in (``apptainer-standin/apptainer``) loads it
by path.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

__all__ = ["SAFE_CHARS", "EnvFileError", "evaluate_env_file"]

#: Characters that need no quoting in either evaluator (outside quotes, in an assignment).
SAFE_CHARS = "A-Za-z0-9_.,:/@%+=-"

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_STATEMENT_RE = re.compile(rf"(?:export[ \t]+)?(?P<name>{_NAME})=")
_EXPORT_RE = re.compile(r"export[ \t]")
_SAFE_RE = re.compile(rf"[{SAFE_CHARS}]+")
_REF_RE = re.compile(
    rf"\$\{{(?P<name>{_NAME}|[1-9][0-9]*):(?:(?P<required>\?)|-(?P<default>[{SAFE_CHARS}]*))\}}"
)
_QUOTED_REFS_RE = re.compile(rf'"(?P<refs>(?:{_REF_RE.pattern})+)"')


class EnvFileError(Exception):
    """An env file this evaluator refuses, or one whose evaluation fails.

    Attributes
    ----------
    lineno : int or None
        The (1-based) line of the offending statement.
    exit_status : int or None
        1 when the evaluation itself failed (a ``${NAME:?}`` with NAME unset or empty), as
        Apptainer reports it ("exit status 1"); None for a refused construct.
    printed : str
        What Apptainer's interpreter prints on stderr for this failure (``"NAME: \\n"``
        for a failed ``${NAME:?}``); empty for a refused construct.

    ``str(error)`` is one line: ``"NAME: "`` (what Apptainer prints) for a failed
    ``${NAME:?}``, else ``"line N: <reason>"``.
    """

    def __init__(
        self, message: str, *, lineno: int | None = None, exit_status: int | None = None
    ) -> None:
        super().__init__(message)
        self.lineno = lineno
        self.exit_status = exit_status
        self.printed = message + "\n" if exit_status is not None else ""

    @property
    def status_text(self) -> str:
        """``"exit status 1"`` for a failed evaluation (Apptainer's wording), else ``""``."""
        return f"exit status {self.exit_status}" if self.exit_status is not None else ""


def _lookup(
    name: str, assigned: Mapping[str, str], host: Mapping[str, str], args: Sequence[str]
) -> str | None:
    if name[0].isdigit():
        index = int(name) - 1
        return args[index] if index < len(args) else None
    if name in assigned:
        return assigned[name]
    return host.get(name)


def _refuse(lineno: int, reason: str) -> EnvFileError:
    return EnvFileError(f"line {lineno}: {reason}", lineno=lineno)


def _why_not(char: str, text: str, pos: int) -> str:
    """The reason an unquoted ``char`` at ``pos`` is refused."""
    if char == "\\":
        return "a backslash outside single quotes (Apptainer keeps it, bash removes it)"
    if char == "`":
        return "a backtick (command substitution; execution is disabled)"
    if text.startswith("$(", pos):
        return "'$(' (command substitution or arithmetic; execution is disabled)"
    if char == "$":
        return "a '$' that is not ${NAME:?} or ${NAME:-default}"
    if char == '"':
        return 'double-quoted content other than "\'" or references like "${NAME:?}"'
    if char in " \t":
        return "unquoted whitespace (it ends the assignment: the rest would be a command)"
    if char == "\r":
        return "a carriage return"
    if char == "\x00":
        return "a NUL byte"
    return f"the unquoted character {char!r} (quote it with '...')"


def evaluate_env_file(
    text: str, host: Mapping[str, str], args: Sequence[str] = ()
) -> dict[str, str]:
    """The variables ``text`` assigns, evaluated as Apptainer's ``--env-file`` (and bash) would.

    Parameters
    ----------
    text : str
        The env file's content.
    host : mapping of str to str
        The host environment the file sees (visible, not exported: only what the file
        assigns is returned).
    args : sequence of str
        The command's arguments, visible as ``${1:?}``... .

    Returns
    -------
    dict of str to str
        Each assigned variable and its value, in the order of first assignment.

    Raises
    ------
    EnvFileError
        For any construct outside the shared subset (the message names the line), and for
        a ``${NAME:?}`` whose variable is unset or empty (message ``"NAME: "``,
        ``exit_status`` 1), as Apptainer fails the launch.

    Examples
    --------
    >>> text = "# rank env\\nA='it'\\"'\\"'s'\\nB=\\"${RANK:?}\\"\\nC=x-${B:?}\\n"
    >>> print(text, end="")
    # rank env
    A='it'"'"'s'
    B="${RANK:?}"
    C=x-${B:?}
    >>> evaluate_env_file(text, {"RANK": "5"})
    {'A': "it's", 'B': '5', 'C': 'x-5'}
    >>> try:
    ...     evaluate_env_file("A='it'\\\\''s'\\n", {})
    ... except EnvFileError as error:
    ...     print(error)
    line 1: A=...: a backslash outside single quotes (Apptainer keeps it, bash removes it)
    >>> try:
    ...     evaluate_env_file('X="${CUDA_VISIBLE_DEVICES:?}"\\n', {"CUDA_VISIBLE_DEVICES": ""})
    ... except EnvFileError as error:
    ...     print(repr(error.printed), error.status_text)
    'CUDA_VISIBLE_DEVICES: \\n' exit status 1
    """
    assigned: dict[str, str] = {}
    pos, lineno, end = 0, 1, len(text)
    while pos < end:
        stop = text.find("\n", pos)
        stop = end if stop < 0 else stop
        line = text[pos:stop]
        if not line.strip(" \t"):
            pos, lineno = stop + 1, lineno + 1
            continue
        if line.startswith("#"):
            for bad in ("\r", "\x00"):
                if bad in line:
                    raise _refuse(lineno, _why_not(bad, line, 0) + " in a comment")
            pos, lineno = stop + 1, lineno + 1
            continue
        statement = _STATEMENT_RE.match(text, pos)
        if statement is None:
            if line[0] in " \t":
                reason = "leading whitespace (write statements at the start of the line)"
            elif _EXPORT_RE.match(line) or re.match(_NAME + r"(?:[ \t]|\Z)", line):
                reason = "not an assignment NAME=WORD (a command; execution is disabled)"
            else:
                reason = "not an assignment NAME=WORD"
            raise _refuse(lineno, reason)
        name, start_line = statement["name"], lineno
        pos = statement.end()
        value: list[str] = []
        while pos < end and text[pos] != "\n":
            char = text[pos]
            if char == "'":
                close = text.find("'", pos + 1)
                if close < 0:
                    raise _refuse(start_line, "an unterminated single quote")
                literal = text[pos + 1 : close]
                for bad in ("\r", "\x00"):
                    if bad in literal:
                        raise _refuse(start_line, _why_not(bad, literal, 0) + " in quotes")
                value.append(literal)
                lineno += literal.count("\n")
                pos = close + 1
            elif text.startswith('"\'"', pos):
                value.append("'")
                pos += 3
            elif (quoted := _QUOTED_REFS_RE.match(text, pos)) is not None:
                value += [
                    _expand(ref, assigned, host, args, start_line)
                    for ref in _REF_RE.finditer(quoted["refs"])
                ]
                pos = quoted.end()
            elif (ref := _REF_RE.match(text, pos)) is not None:
                value.append(_expand(ref, assigned, host, args, start_line))
                pos = ref.end()
            elif (safe := _SAFE_RE.match(text, pos)) is not None:
                value.append(safe.group())
                pos = safe.end()
            else:
                raise _refuse(lineno, f"{name}=...: " + _why_not(char, text, pos))
        assigned[name] = "".join(value)
        pos, lineno = pos + 1, lineno + 1
    return assigned


def _expand(
    ref: re.Match[str],
    assigned: Mapping[str, str],
    host: Mapping[str, str],
    args: Sequence[str],
    lineno: int,
) -> str:
    name = ref["name"]
    found = _lookup(name, assigned, host, args)
    if found:
        return found
    if ref["required"]:
        # what Apptainer's interpreter prints for ${NAME:?}; then "exit status 1"
        raise EnvFileError(f"{name}: ", lineno=lineno, exit_status=1)
    return ref["default"]
