# SPDX-License-Identifier: MIT
"""The secret rule, and every way mushin-box redacts: one module, one verb each.

What counts as a secret is decided by name (:func:`is_secret_name`): a config key or an
environment variable whose words include ``token``, ``password``, ``key``, ``auth``...,
unless its last word only describes the secret (``key_dim``, ``auth_url``,
``api_key_path``). Credentials inside a URL (``scheme://user:pass@host``) are secret
whatever the name. Everything that writes a file asks this module, so the rule cannot
drift between the sidecars, the env file's record and the error messages:

* :func:`redact` a JSON-like value (secret keys and URL credentials);
* :func:`redact_env` a mapping of environment variables;
* :func:`redact_url_credentials` free text;
* :func:`redact_env_text` an env file's text, :func:`redact_argv` and
  :func:`redact_command` a command line;
* :func:`redact_secret_values` free text (a traceback) by the values of secret-looking
  environment variables, where no key tells.

Hiding values *before* a launch, so that files never hold them at all, is
:mod:`mushin_box._core.secrets`; it uses the same rule.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "MIN_SCRUB_LENGTH",
    "REDACTED",
    "URL_CREDENTIALS",
    "is_secret_name",
    "is_secret_path",
    "redact",
    "redact_argv",
    "redact_command",
    "redact_env",
    "redact_env_text",
    "redact_secret_values",
    "redact_url_credentials",
    "secret_env_values",
]

REDACTED = "<redacted>"
_SECRET_WORDS = frozenset(
    "token secret password passwd pwd credential credentials key apikey auth "
    "passphrase cookie".split()
)
#: a last word that makes the name describe a secret rather than hold it (key_dim,
#: pad_token_id, max_token_len, api_key_path, auth_url, SSH_AUTH_SOCK...)
_DESCRIBING_WORDS = frozenset(
    "id ids idx index dim dims len length size count num number type types kind mode "
    "name names path paths file files dir url uri host port endpoint frac fraction "
    "ratio prob rate limit budget min max ttl timeout expiry env var field column col "
    "pattern prefix suffix format enabled enable required use sock socket class "
    "method scheme".split()
)
_SPLIT = re.compile(r"[^a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
#: ``scheme://userinfo@``: credentials inside a URL (redacted here, hidden by secrets.py)
URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/\s@]+)@")
#: ``NAME=value`` / ``export NAME=value`` at the start of an env-file line
_ASSIGNMENT = re.compile(r"^(?P<lead>\s*(?:export\s+)?)(?P<name>[A-Za-z_][A-Za-z0-9_]*)=")
#: a value that only names another variable (``"${HF_TOKEN:?}"``): no secret in the file
_REFERENCE = re.compile(r'^("?)\$\{[A-Za-z_][A-Za-z0-9_]*(?::\?)?\}\1\s*\Z')
_WORD_ASSIGNMENT = re.compile(r"^(?P<lead>-{0,2})(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)=")
_FLAG = re.compile(r"^-{1,2}(?P<name>[A-Za-z][A-Za-z0-9_-]*)\Z")
#: flags whose name looks secret but whose value is not (Apptainer's working directory)
_NOT_SECRET_FLAGS = frozenset({"--pwd"})
#: environment variables whose names only look secret ("pwd" = password in a config key)
_NOT_SECRET_ENV = frozenset({"PWD", "OLDPWD"})
#: shorter secret values are not searched for in free text (they would match anywhere)
MIN_SCRUB_LENGTH = 6


# ---------------------------------------------------------------------------- the rule


def is_secret_name(name: str) -> bool:
    """Does a config key or environment variable name look like it holds a secret?

    Examples
    --------
    >>> [is_secret_name(n) for n in ("WANDB_API_KEY", "hfToken", "db.password", "lr")]
    [True, True, True, False]

    A last word that describes the secret instead of holding it makes it no secret:

    >>> [is_secret_name(n) for n in ("key_dim", "pad_token_id", "api_key_path", "auth_url")]
    [False, False, False, False]
    """
    words = [w for w in _SPLIT.split(_CAMEL.sub("_", name).lower()) if w]
    if not words or words[-1] in _DESCRIBING_WORDS:
        return False
    return any(w in _SECRET_WORDS for w in words)


def redact_url_credentials(text: str) -> str:
    """``text`` with credentials inside URLs cut out.

    Examples
    --------
    >>> redact_url_credentials("see postgres://me:pw@db/x and https://h/y")
    'see postgres://<redacted>@db/x and https://h/y'
    """
    if "@" not in text or "://" not in text:
        return text
    return URL_CREDENTIALS.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", text)


def is_secret_path(path: str) -> bool:
    """Does any key along a dotted config path look like it holds a secret?

    Examples
    --------
    >>> [is_secret_path(p) for p in ("db.password", "credentials.user", "model.lr")]
    [True, True, False]
    """
    return any(is_secret_name(part) for part in path.split(".") if not part.isdigit())


# ---------------------------------------------------------------------------- values


def _redact_strings(value: Any) -> Any:
    if isinstance(value, str):
        return redact_url_credentials(value)
    if isinstance(value, Mapping):
        return {k: _redact_strings(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_strings(v) for v in value]
    return value


def redact(value: Any) -> Any:
    """A copy of a JSON-like value: secret-looking keys' values and URL credentials cut out.

    A key whose value is ``None`` keeps it (nothing to hide, and "unset" is worth seeing).

    Examples
    --------
    >>> redact({"db": {"password": "hunter2", "url": "postgres://me:pw@db/x"}, "lr": 0.1})
    {'db': {'password': '<redacted>', 'url': 'postgres://<redacted>@db/x'}, 'lr': 0.1}
    """
    if isinstance(value, Mapping):
        return {
            k: (REDACTED if is_secret_name(str(k)) and v is not None else redact(v))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    return _redact_strings(value)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """Environment variables with secret-looking ones' values and URL credentials cut out.

    Examples
    --------
    >>> redact_env({"HF_TOKEN": "abc", "DB": "postgres://me:pw@db/x"})
    {'HF_TOKEN': '<redacted>', 'DB': 'postgres://<redacted>@db/x'}
    """
    return {k: REDACTED if is_secret_name(k) else _redact_strings(v) for k, v in env.items()}


# ---------------------------------------------------------------------------- commands


def _quote_state(text: str, state: str | None) -> str | None:
    """The shell quote still open at the end of ``text`` (``"'"``, ``'"'`` or ``None``)."""
    i = 0
    while i < len(text):
        c = text[i]
        if state is None:
            if c == "\\":
                i += 1
            elif c in "'\"":
                state = c
        elif state == "'":
            if c == "'":
                state = None
        elif c == "\\":
            i += 1
        elif c == '"':
            state = None
        i += 1
    return state


def redact_env_text(text: str) -> str:
    """An env file's text with the values of secret-looking assignments replaced.

    ``NAME=value`` lines (``export NAME=value`` too) whose ``NAME`` looks secret become
    ``NAME=<redacted>``, including the continuation lines of a quoted value that spans
    several lines; a value that only forwards a variable by reference
    (``HF_TOKEN="${HF_TOKEN:?}"``: the rank wrapper's way to pass a secret) holds no secret
    and is kept. Credentials inside URLs are cut out of every line. Comments and other
    lines are kept.

    Examples
    --------
    >>> print(redact_env_text("# rank env\\nLR=0.1\\nWANDB_API_KEY='abc\\ndef'\\n"
    ...                       'HF_TOKEN="${HF_TOKEN:?}"\\nDB=postgres://me:pw@db/x\\n'), end="")
    # rank env
    LR=0.1
    WANDB_API_KEY=<redacted>
    HF_TOKEN="${HF_TOKEN:?}"
    DB=postgres://<redacted>@db/x
    """
    out: list[str] = []
    open_quote: str | None = None
    hiding = False
    for line in text.splitlines(keepends=True):
        if open_quote is not None:  # inside a value that spans lines
            open_quote = _quote_state(line, open_quote)
            if not hiding:
                out.append(redact_url_credentials(line))
            continue
        m = _ASSIGNMENT.match(line)
        if m is None:
            out.append(redact_url_credentials(line))
            continue
        value = line[m.end() :]
        open_quote = _quote_state(value, None)
        hiding = is_secret_name(m.group("name")) and _REFERENCE.match(value) is None
        if hiding:
            newline = "\n" if line.endswith("\n") else ""
            out.append(f"{m.group('lead')}{m.group('name')}={REDACTED}{newline}")
        else:
            out.append(redact_url_credentials(line))
    return "".join(out)


def _redact_word(word: str) -> str:
    m = _WORD_ASSIGNMENT.match(word)
    if m is None:
        return redact_url_credentials(word)
    if is_secret_name(m.group("name")) and word[: m.end() - 1] not in _NOT_SECRET_FLAGS:
        return f"{word[: m.end()]}{REDACTED}"
    return f"{word[: m.end()]}{_redact_word(word[m.end() :])}"  # --env=NAME=value


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A command's words with secret-looking values replaced.

    ``NAME=value`` and ``--name=value`` words whose name looks secret keep the name only;
    the word after a secret-looking flag (``--token abc``) is replaced; credentials inside
    URLs are cut out. Apptainer's ``--pwd`` (a directory) is not a secret.

    Examples
    --------
    >>> redact_argv(["apptainer", "exec", "--env", "HF_TOKEN=abc", "--pwd", "/w",
    ...              "--password", "x", "i.sif", "python"])
    ... # doctest: +NORMALIZE_WHITESPACE
    ['apptainer', 'exec', '--env', 'HF_TOKEN=<redacted>', '--pwd', '/w', '--password',
     '<redacted>', 'i.sif', 'python']
    """
    out: list[str] = []
    hide_next = False
    for word in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        flag = _FLAG.match(word)
        if flag is not None and word not in _NOT_SECRET_FLAGS:
            hide_next = is_secret_name(flag.group("name"))
        out.append(_redact_word(word))
    return out


def redact_command(command: str) -> tuple[str, list[str] | None]:
    """(the command, redacted; its argv, redacted, or ``None`` if it does not split).

    Examples
    --------
    >>> redact_command("run --token abc x")
    ("run --token '<redacted>' x", ['run', '--token', '<redacted>', 'x'])
    """
    try:
        argv = shlex.split(command)
    except ValueError:  # unbalanced quotes: redact the words as whitespace splits them
        words = re.split(r"(\s+)", command)
        return "".join(w if w.isspace() else _redact_word(w) for w in words), None
    redacted = redact_argv(argv)
    return (command if redacted == argv else shlex.join(redacted)), redacted


# ---------------------------------------------------------------------------- free text


def secret_env_values(environ: Mapping[str, str] | None = None) -> set[str]:
    """Values of secret-looking environment variables (those hidden by a vault included),
    at least :data:`MIN_SCRUB_LENGTH` long."""
    env = os.environ if environ is None else environ
    return {
        v
        for k, v in env.items()
        if is_secret_name(k) and k not in _NOT_SECRET_ENV and len(v) >= MIN_SCRUB_LENGTH
    }


def redact_secret_values(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with every value of a secret-looking environment variable replaced.

    For free text such as a traceback, where secrets cannot be found by their key.

    Examples
    --------
    >>> redact_secret_values("bad token hunter22", {"API_TOKEN": "hunter22", "LR": "hunter"})
    'bad token <redacted>'
    """
    for value in sorted(secret_env_values(environ), key=len, reverse=True):
        text = text.replace(value, REDACTED)
    return text
