# SPDX-License-Identifier: MIT
"""What the CLI prints, cleaned by the rule the files are cleaned by (:mod:`.redact`).

Every line a command prints goes through one :class:`TextRedactor`
(``mushin_box.cli.output``), built once per command from the values its command line gave
secret-looking names (:func:`command_line_secrets`) and the secret-looking environment
variables: :func:`~mushin_box._core.redact.redact_text` with those read once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mushin_box._core.redact import (
    FLAG_WORD,
    MIN_ARGV_SCRUB,
    NOT_SECRET_FLAGS,
    TEXT_ASSIGNMENT,
    SecretRule,
    compile_rule,
    is_reference,
    scrub,
    secret_env_values,
    secret_rule,
    values_pattern,
)

__all__ = ["TextRedactor", "command_line_secrets"]


def _unquoted(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def command_line_secrets(argv: Sequence[str], declared: Sequence[str] = ()) -> set[str]:
    """The values a command line gives secret-looking names: ``+api_key=abc``,
    ``--token=abc``, ``--token abc`` (as written, unquoted, and each value of a comma
    list), so that a message which quotes one back can be cleaned (:class:`TextRedactor`).
    References (``${oc.env:NAME}``) and empty values hold no secret.

    Examples
    --------
    >>> sorted(command_line_secrets(["launch", "x.py", "+db.password=hunter2", "lr=0.1",
    ...                              "--token", "abcd1234", "api_key='${oc.env:K}'"]))
    ['abcd1234', 'hunter2']
    """
    rule = _rule_or_default(declared)
    out: set[str] = set()
    hide_next = False
    for word in argv:
        if hide_next:
            hide_next = False
            if not word.startswith("-"):
                out.add(word)
                continue
        flag = FLAG_WORD.match(word)
        if flag is not None:
            hide_next = word not in NOT_SECRET_FLAGS and rule.name(flag.group("name"))
            continue
        m = TEXT_ASSIGNMENT.match(word)
        if m is None or not rule.path(m.group("name").replace("-", "_")):
            continue
        value = word[m.start("value") :]
        if not value or is_reference(value):
            continue
        out |= {value, _unquoted(value), *(_unquoted(v) for v in value.split(","))}
    return {v for v in out if v and not is_reference(v)}


def _rule_or_default(declared: Sequence[str] = ()) -> SecretRule:
    """The rule in effect; the built-in one where the project's setting is broken (the
    command that reads it says so; printing must not fail over it)."""
    try:
        return secret_rule(declared)
    except ValueError:
        return compile_rule(())


class TextRedactor:
    """:func:`~mushin_box._core.redact.redact_text` for every line a command prints, with
    the rule, the environment's secret values and ``values`` (the command line's secrets,
    :func:`command_line_secrets`) read once, at construction.

    Examples
    --------
    >>> clean = TextRedactor(["hunter22"], environ={})
    >>> clean("write +x.api_key=hunter22: got [hunter22 and https://me:pw@h/ lr=0.1")
    'write +x.api_key=<redacted>: got [<redacted> and https://<redacted>@h/ lr=0.1'
    """

    def __init__(
        self, values: Sequence[str] | set[str] = (), environ: Mapping[str, str] | None = None
    ) -> None:
        #: why the project's secret names could not be read (the built-in rule is used)
        self.problem: str | None = None
        try:
            self.secret_rule = secret_rule()
            found = secret_env_values(environ)
        except ValueError as exc:  # a broken project setting: printing must not fail
            self.problem = str(exc)
            self.secret_rule, found = compile_rule(()), set()
        found |= {v for v in values if len(v) >= MIN_ARGV_SCRUB}
        self._values = values_pattern(found)

    def __call__(self, text: str) -> str:
        return scrub(text, self._values, self.secret_rule)
