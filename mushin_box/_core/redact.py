# SPDX-License-Identifier: MIT
"""The secret rule, and redaction by it: :func:`redact` a value, :func:`redact_text` text.

What counts as a secret is decided by name (:func:`is_secret_name`): a config key or an
environment variable whose words include ``token``, ``password``, ``key``, ``auth``...,
unless its last word only describes the secret (``key_dim``, ``auth_url``,
``api_key_path``). Credentials inside a URL (``scheme://user:pass@host``) are secret
whatever the name. A user declares more names (:func:`secret_names_in_effect`): the
project's ``[tool.mushin-box] secret-names`` and ``Workflow(secrets=...)``; a declared
name is secret whatever its words. Everything that writes a file or prints asks this
module, so the rule cannot drift between the sidecars, the env file's record, the error
messages and the terminal:

* :func:`redact` a value: a mapping (secret-looking keys' values; an environment too), a
  command's words (``NAME=value``, ``--flag=value``, the word after a secret-looking
  flag), a string (as text), an exception (its message and its chained ones', in place);
* :func:`redact_text` any text (an env file, a traceback, a printed line): secret-looking
  ``NAME=value`` assignments (an env file's quoted value across lines too), the values of
  secret-looking environment variables and any given ones wherever they stand, and URL
  credentials.

Hiding values *before* a launch, so that files never hold them at all, is
:mod:`mushin_box._core.secrets`; it uses the same rule.
"""

from __future__ import annotations

import functools
import json
import os
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from stat import S_ISREG
from typing import Any, NamedTuple

from mushin_box._core.layout import SECRET_ENV_PREFIX, SECRET_NAMES_ENV

__all__ = [
    "MIN_SCRUB_LENGTH",
    "REDACTED",
    "URL_CREDENTIALS",
    "check_secret_names",
    "is_secret_name",
    "is_secret_path",
    "redact",
    "redact_secret_values",
    "redact_text",
    "project_secret_names",
    "secret_env_values",
    "secret_names_in_effect",
]

REDACTED = "<redacted>"
_SECRET_WORDS = frozenset(
    "token secret password passwd pwd credential credentials key apikey auth "
    "passphrase cookie passcode passkey bearer jwt privkey privatekey secretkey "
    "accesskey accesstoken authtoken".split()
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
#: word boundaries inside an identifier: camelCase, an acronym before a word (``JWTToken``;
#: not ``keyIDs``), letters and digits (``password2``)
_BOUNDARY = re.compile(
    r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z]{2})|(?<=[A-Za-z])(?=[0-9])|(?<=[0-9])(?=[a-z])"
)
#: ``scheme://userinfo@``: credentials inside a URL (redacted here, hidden by secrets.py)
URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/\s@]+)@")
#: ``NAME=value`` / ``export NAME=value`` at the start of an env-file line
_ASSIGNMENT = re.compile(r"^(?P<lead>\s*(?:export\s+)?)(?P<name>[A-Za-z_][A-Za-z0-9_]*)=")
_WORD_ASSIGNMENT = re.compile(r"^(?P<lead>-{0,2})(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)=")
FLAG_WORD = re.compile(r"^-{1,2}(?P<name>[A-Za-z][A-Za-z0-9_-]*)\Z")
#: flags whose name looks secret but whose value is not (Apptainer's working directory)
NOT_SECRET_FLAGS = frozenset({"--pwd"})
#: environment variables whose names only look secret ("pwd" = password in a config key)
_NOT_SECRET_ENV = frozenset({"PWD", "OLDPWD"})
#: a value found by its variable's name only, and shorter, is not searched for in free
#: text (it would match anywhere); values the vault moved (``MUSHIN_SECRET_*``) always are
MIN_SCRUB_LENGTH = 6
#: a value its command line gives a secret-looking name is searched for in printed text
#: from this length (a shorter one would match inside unrelated words; its ``NAME=value``
#: form is redacted whatever its length)
MIN_ARGV_SCRUB = 4
#: ``NAME=value`` anywhere in free text: a Hydra override (``+NAME``, ``~NAME``), a flag
#: (``--NAME=``), a dotted path; the value quoted, or up to a space, quote or backslash (a
#: backslash: JSON's escapes stay whole, so redacted JSON stays JSON)
#: a value that only stands for one in a message or a usage line (``KEY=VALUE``)
PLACEHOLDER = re.compile(r"(?:VALUE|\.\.\.|<[a-z_]+>)[,.;:)\]]*\Z")
TEXT_ASSIGNMENT = re.compile(
    r"(?<![\w.+~-])(?:[+~]{1,2}|-{1,2})?(?P<name>[A-Za-z_][\w.-]*)="
    r"(?P<value>'[^'\n]*'|\"[^\"\n]*\"|[^\s'\"\\]*)"
)
_PYPROJECT = "pyproject.toml"
_EXAMPLE = '["my_field", "db.dsn"]'


# ---------------------------------------------------------------------------- the rule


def _words(name: str) -> tuple[str, ...]:
    return tuple(w for w in _SPLIT.split(_BOUNDARY.sub("_", name).lower()) if w)


def check_secret_names(names: Any, *, where: str) -> tuple[str, ...]:
    """``names`` as a tuple, if it is a list of config key names or dotted config paths.

    Raises
    ------
    ValueError
        One line that says where the names came from (``where``) and what to write.
    """
    if not isinstance(names, list | tuple):
        raise ValueError(
            f"{where} must be a list of config key names or dotted config paths, "
            f"e.g. {_EXAMPLE}; got {names!r}"
        )
    for name in names:
        if not isinstance(name, str) or not all(_words(part) for part in name.split(".")):
            raise ValueError(
                f"{where}: {name!r} is not a config key name or dotted config path; "
                f"give a key name or a path from the config's root, e.g. {_EXAMPLE}"
            )
    return tuple(names)


def toml_problem(exc: Exception) -> str:
    """What is wrong with a TOML file, on one line. Nesting deeper than Python's recursion
    limit (a 1000-deep array) is the parser's ``RecursionError``: it is caught, so such a
    file is bounded by that limit and costs one line, never a traceback."""
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return " ".join(str(exc).split())


@functools.lru_cache(maxsize=16)
def _read_project(path: str, mtime_ns: int, size: int) -> tuple[str, ...]:
    """The setting of one pyproject.toml (cached until the file changes)."""
    where = f"{path}: [tool.mushin-box] secret-names"
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as exc:
        problem = toml_problem(exc)
        raise ValueError(
            f"{where} cannot be read ({problem}); fix the file, e.g. secret-names = {_EXAMPLE}"
        ) from None
    tool = data.get("tool")
    table = tool.get("mushin-box") if isinstance(tool, dict) else None
    if not isinstance(table, dict):
        return ()
    if "secret_names" in table:  # a misspelled setting would leave the secrets in clear
        raise ValueError(
            f"{where}: the setting is spelled with a hyphen, not secret_names; write "
            f"secret-names = {_EXAMPLE}"
        )
    return check_secret_names(table.get("secret-names", []), where=where)


def project_secret_names(cwd: str | os.PathLike[str] | None = None) -> tuple[str, ...]:
    """The names the project declares secret: ``[tool.mushin-box] secret-names`` in the
    nearest ``pyproject.toml`` at or above ``cwd`` (default: the working directory).

    The nearest file is the project, as for pip and ruff: a nearer pyproject.toml without
    the setting declares nothing, and files further up are not read.
    """
    try:  # os.path, not pathlib: the rule asks on every name, this walk must be cheap
        directory = os.getcwd() if cwd is None else os.path.realpath(cwd)
    except OSError:  # the working directory was removed: no project
        return ()
    while True:
        path = os.path.join(directory, _PYPROJECT)
        try:
            found = os.stat(path)
        except OSError:
            found = None
        if found is not None and S_ISREG(found.st_mode):
            return _read_project(path, found.st_mtime_ns, found.st_size)
        parent = os.path.dirname(directory)
        if parent == directory:
            return ()
        directory = parent


@functools.lru_cache(maxsize=16)
def _carried_names(text: str) -> tuple[str, ...]:
    try:
        names = json.loads(text)
    except ValueError:
        names = text
    return check_secret_names(names, where=SECRET_NAMES_ENV)


def secret_names_in_effect(
    declared: Sequence[str] = (), environ: Mapping[str, str] | None = None
) -> tuple[str, ...]:
    """The names declared secret here: those a driver carried to this process
    (:data:`~mushin_box._core.layout.SECRET_NAMES_ENV`), else the project's
    (:func:`project_secret_names`); and ``declared``.

    Raises
    ------
    ValueError
        ``declared`` or the project's setting is not a list of names (the message says
        which and what to write).
    """
    env = os.environ if environ is None else environ
    carried = env.get(SECRET_NAMES_ENV)
    base = _carried_names(carried) if carried is not None else project_secret_names()
    extra = check_secret_names(declared, where="declared secret names")
    return tuple(dict.fromkeys([*base, *extra]))


class SecretRule(NamedTuple):
    """The secret rule with its declared names: single names (as words) and dotted paths."""

    names: frozenset[tuple[str, ...]]
    paths: frozenset[tuple[tuple[str, ...], ...]]

    def name(self, name: str) -> bool:
        words = _words(name)
        if words in self.names:  # declared: secret whatever its last word
            return True
        if not words or words[-1] in _DESCRIBING_WORDS:
            return False
        return any(w in _SECRET_WORDS for w in words)

    def path(self, path: str) -> bool:
        parts = path.split(".")
        if any(self.name(part) for part in parts if not part.isdigit()):
            return True
        words = tuple(_words(part) for part in parts)
        return any(words[: len(p)] == p for p in self.paths)


@functools.lru_cache(maxsize=64)
def compile_rule(names: tuple[str, ...]) -> SecretRule:
    split = [tuple(_words(part) for part in name.split(".")) for name in names]
    return SecretRule(
        frozenset(p[0] for p in split if len(p) == 1), frozenset(p for p in split if len(p) > 1)
    )


def secret_rule(declared: Sequence[str] = ()) -> SecretRule:
    return compile_rule(secret_names_in_effect(declared))


def is_secret_name(name: str, declared: Sequence[str] = ()) -> bool:
    """Does a config key or environment variable name look like it holds a secret?

    ``declared`` adds names (besides the project's, :func:`secret_names_in_effect`); they
    match whatever the spelling (``my_field``, ``MY_FIELD``, ``myField``). Dotted ones are
    paths: see :func:`is_secret_path`.

    Examples
    --------
    >>> [is_secret_name(n) for n in ("WANDB_API_KEY", "hfToken", "db.password", "lr")]
    [True, True, True, False]

    A last word that describes the secret instead of holding it makes it no secret, unless
    the name was declared:

    >>> [is_secret_name(n) for n in ("key_dim", "pad_token_id", "api_key_path", "auth_url")]
    [False, False, False, False]
    >>> is_secret_name("sessionId", ["session_id"])
    True
    """
    return secret_rule(declared).name(name)


def _redact_urls(text: str) -> str:
    if "@" not in text or "://" not in text:
        return text
    return URL_CREDENTIALS.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", text)


def is_secret_path(path: str, declared: Sequence[str] = ()) -> bool:
    """Does any key along a dotted config path look like it holds a secret, or does the
    path start with a declared dotted path (from the config's root)?

    Examples
    --------
    >>> [is_secret_path(p) for p in ("db.password", "credentials.user", "model.lr")]
    [True, True, False]
    >>> [is_secret_path(p, ["db.dsn"]) for p in ("db.dsn", "db.dsn.user", "cache.db.dsn")]
    [True, True, False]
    """
    return secret_rule(declared).path(path)


# ---------------------------------------------------------------------------- values


def redact(value: Any, declared: Sequence[str] = ()) -> Any:
    """A copy of ``value`` with its secrets cut out (an exception: itself, scrubbed).

    * a mapping (a JSON-like record, an environment): a secret-looking key's value, unless
      ``None`` (nothing to hide, and "unset" is worth seeing); declared dotted paths
      (:func:`is_secret_path`) count from its root; URL credentials in every string;
    * a list or tuple of strings, a command's words: ``NAME=value`` and ``--name=value``
      words with a secret-looking name keep the name only, the word after a secret-looking
      flag (``--token abc``) is replaced (Apptainer's ``--pwd`` is a directory);
    * a string: :func:`redact_text`;
    * an exception: the string arguments of it and of the exceptions chained to it, in
      place, by the values of secret-looking environment variables
      (:func:`redact_secret_values`): its text is written elsewhere too (submitit pickles
      its traceback; the driver re-raises it to a terminal). An exception whose
      ``__str__`` ignores its args is left as it is.

    Examples
    --------
    >>> redact({"db": {"password": "hunter2", "url": "postgres://me:pw@db/x"}, "lr": 0.1})
    {'db': {'password': '<redacted>', 'url': 'postgres://<redacted>@db/x'}, 'lr': 0.1}
    >>> redact(["apptainer", "--env", "HF_TOKEN=abc", "--pwd", "/w", "--password", "x"])
    ['apptainer', '--env', 'HF_TOKEN=<redacted>', '--pwd', '/w', '--password', '<redacted>']
    """
    if isinstance(value, BaseException):
        return _redact_exception(value)
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, list | tuple) and value and all(isinstance(v, str) for v in value):
        return _redact_argv(value, secret_rule(declared))
    return _redact(value, secret_rule(declared), ())


def _redact(value: Any, rule: SecretRule, at: tuple[tuple[str, ...], ...]) -> Any:
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            path = (*at, _words(str(k)))
            secret = rule.name(str(k)) or path in rule.paths  # parents were checked already
            out[k] = REDACTED if secret and v is not None else _redact(v, rule, path)
        return out
    if isinstance(value, list | tuple):
        return [_redact(v, rule, (*at, (str(i),))) for i, v in enumerate(value)]
    return _redact_urls(value) if isinstance(value, str) else value


def _redact_word(word: str, rule: SecretRule) -> str:
    m = _WORD_ASSIGNMENT.match(word)
    if m is None:
        return _redact_urls(word)
    if rule.name(m.group("name")) and word[: m.end() - 1] not in NOT_SECRET_FLAGS:
        return f"{word[: m.end()]}{REDACTED}"
    return f"{word[: m.end()]}{_redact_word(word[m.end() :], rule)}"  # --env=NAME=value


def _redact_argv(argv: Sequence[str], rule: SecretRule) -> list[str]:
    out: list[str] = []
    hide_next = False
    for word in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        flag = FLAG_WORD.match(word)
        if flag is not None and word not in NOT_SECRET_FLAGS:
            hide_next = rule.name(flag.group("name"))
        out.append(_redact_word(word, rule))
    return out


def _redact_exception(exc: BaseException) -> BaseException:
    pending, seen = [exc], set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        args = tuple(redact_secret_values(a) if isinstance(a, str) else a for a in current.args)
        if args != current.args:
            current.args = args
        pending += [e for e in (current.__cause__, current.__context__) if e is not None]
    return exc


# ---------------------------------------------------------------------------- text


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


def _redact_env_lines(text: str, rule: SecretRule) -> str:
    """A ``NAME=value`` line (``export`` too) whose quoted value spans lines, and whose
    name looks secret, keeps the name only, its continuation lines dropped (a value on one
    line is the assignment pass's)."""
    out: list[str] = []
    open_quote: str | None = None
    hiding = False
    for line in text.splitlines(keepends=True):
        if open_quote is not None:  # inside a value that spans lines
            open_quote = _quote_state(line, open_quote)
            if not hiding:
                out.append(line)
            continue
        m = _ASSIGNMENT.match(line)
        if m is None:
            out.append(line)
            continue
        open_quote = _quote_state(line[m.end() :], None)
        hiding = open_quote is not None and rule.name(m.group("name"))
        if hiding:
            newline = "\n" if line.endswith("\n") else ""
            out.append(f"{m.group('lead')}{m.group('name')}={REDACTED}{newline}")
        else:
            out.append(line)
    return "".join(out)


def _unquoted(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def is_reference(value: str) -> bool:
    """``${oc.env:NAME}``, ``${NAME:?}`` and the like: names where a secret is, holds none
    (``${NAME:-default}`` holds its default)."""
    inner = _unquoted(value)
    return inner.startswith("${") and inner.endswith("}") and ":-" not in inner


def _assignment(m: re.Match[str], rule: SecretRule) -> str:
    value = m.group("value")
    if not value or value.startswith(REDACTED) or is_reference(value):
        return m.group(0)
    if PLACEHOLDER.match(value):  # help's own KEY=VALUE, api_key=...
        return m.group(0)
    if not rule.path(m.group("name").replace("-", "_")):
        return m.group(0)
    return m.group(0)[: m.start("value") - m.start(0)] + REDACTED


def values_pattern(values: Iterable[str]) -> re.Pattern[str] | None:
    """One pattern of ``values``, longest first: no value is matched inside another."""
    ordered = sorted(set(values) - {"", REDACTED}, key=len, reverse=True)
    return re.compile("|".join(map(re.escape, ordered))) if ordered else None


def scrub(text: str, values: re.Pattern[str] | None, rule: SecretRule) -> str:
    """:func:`redact_text` with its values and rule given (a printer builds them once)."""
    if not text:
        return text
    if "=" in text:
        text = _redact_env_lines(text, rule)
    if values is not None:
        text = values.sub(REDACTED, text)
    if "=" in text:
        text = TEXT_ASSIGNMENT.sub(lambda m: _assignment(m, rule), text)
    return _redact_urls(text)


def redact_text(
    text: str, values: Iterable[str] = (), environ: Mapping[str, str] | None = None
) -> str:
    """``text`` with its secrets cut out: secret-looking ``NAME=value`` assignments keep
    the name only (an env file's line, an override, a flag, a dotted path; a reference
    such as ``${oc.env:NAME}`` is the way to pass a secret and is kept), the values of
    :func:`secret_env_values` and ``values`` are replaced wherever they stand, and URL
    credentials are cut out.

    Examples
    --------
    >>> print(redact_text("# rank env\\nLR=0.1\\nWANDB_API_KEY='abc\\ndef'\\n"
    ...                   'HF_TOKEN="${HF_TOKEN:?}"\\nDB=postgres://me:pw@db/x\\n'), end="")
    # rank env
    LR=0.1
    WANDB_API_KEY=<redacted>
    HF_TOKEN="${HF_TOKEN:?}"
    DB=postgres://<redacted>@db/x
    >>> redact_text("got +x.api_key=hunter22 and hunter22", ["hunter22"], environ={})
    'got +x.api_key=<redacted> and <redacted>'
    """
    rule = secret_rule()  # once: the rule looks up the project's declared names on disk
    found = secret_env_values(environ) | set(values)
    return scrub(text, values_pattern(found), rule)


def secret_env_values(environ: Mapping[str, str] | None = None) -> set[str]:
    """The values to scrub from free text: every value the vault moved into the
    environment (``MUSHIN_SECRET_*``, also as ``APPTAINERENV_MUSHIN_SECRET_*``), whatever
    its length; and values of other secret-looking variables, found by name only, at least
    :data:`MIN_SCRUB_LENGTH` long."""
    env = os.environ if environ is None else environ
    rule = compile_rule(secret_names_in_effect(environ=env))
    out: set[str] = set()
    for k, v in env.items():
        if not v:
            continue
        if SECRET_ENV_PREFIX in k:  # a known secret: a short one is still a secret
            out.add(v)
        elif rule.name(k) and k not in _NOT_SECRET_ENV and len(v) >= MIN_SCRUB_LENGTH:
            out.add(v)
    return out


def redact_secret_values(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with every value of :func:`secret_env_values` replaced, and nothing else:
    the pass of :func:`redact_text` for text whose assignments are not the process's.

    Examples
    --------
    >>> redact_secret_values("bad token hunter22", {"API_TOKEN": "hunter22", "LR": "hunter"})
    'bad token <redacted>'
    """
    pattern = values_pattern(secret_env_values(environ))
    return text if pattern is None else pattern.sub(REDACTED, text)
