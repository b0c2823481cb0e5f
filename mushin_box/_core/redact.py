# SPDX-License-Identifier: MIT
"""The secret rule, and every way mushin-box redacts: one module, one verb each.

What counts as a secret is decided by name (:func:`is_secret_name`): a config key or an
environment variable whose words include ``token``, ``password``, ``key``, ``auth``...,
unless its last word only describes the secret (``key_dim``, ``auth_url``,
``api_key_path``). Credentials inside a URL (``scheme://user:pass@host``) are secret
whatever the name. A user declares more names (:func:`secret_names_in_effect`): the
project's ``[tool.mushin-box] secret-names`` and ``Workflow(secrets=...)``; a declared
name is secret whatever its words. Everything that writes a file asks this module, so the
rule cannot drift between the sidecars, the env file's record and the error messages:

* :func:`redact` a JSON-like value (secret keys and URL credentials);
* :func:`redact_env` a mapping of environment variables;
* :func:`redact_url_credentials` free text;
* :func:`redact_env_text` an env file's text, :func:`redact_argv` and
  :func:`redact_command` a command line;
* :func:`redact_secret_values` free text (a traceback) by the values of secret-looking
  environment variables, where no key tells, and :func:`redact_exception` an exception's
  message the same way;
* :mod:`mushin_box._core.termredact` every line a command prints: ``NAME=value`` with
  a secret-looking name, URL credentials, secret-looking environment variables' values,
  and the values that its command line gave secret-looking names, wherever they are
  echoed back (Hydra's and the parser's messages quote them).

Hiding values *before* a launch, so that files never hold them at all, is
:mod:`mushin_box._core.secrets`; it uses the same rule.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import tomllib
from collections.abc import Mapping, Sequence
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
    "redact_argv",
    "redact_command",
    "redact_env",
    "redact_env_text",
    "redact_exception",
    "redact_secret_values",
    "redact_url_credentials",
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
#: a value that only names another variable (``"${HF_TOKEN:?}"``): no secret in the file
_REFERENCE = re.compile(r'^("?)\$\{[A-Za-z_][A-Za-z0-9_]*(?::\?)?\}\1\s*\Z')
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


@functools.lru_cache(maxsize=16)
def _read_project(path: str, mtime_ns: int, size: int) -> tuple[str, ...]:
    """The setting of one pyproject.toml (cached until the file changes)."""
    where = f"{path}: [tool.mushin-box] secret-names"
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        problem = " ".join(str(exc).split())
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


def _redact_strings(value: Any) -> Any:
    if isinstance(value, str):
        return redact_url_credentials(value)
    if isinstance(value, Mapping):
        return {k: _redact_strings(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_strings(v) for v in value]
    return value


def redact(value: Any, declared: Sequence[str] = ()) -> Any:
    """A copy of a JSON-like value: secret-looking keys' values and URL credentials cut out.

    A key whose value is ``None`` keeps it (nothing to hide, and "unset" is worth seeing).
    Declared dotted paths (:func:`is_secret_path`) count from ``value``'s root.

    Examples
    --------
    >>> redact({"db": {"password": "hunter2", "url": "postgres://me:pw@db/x"}, "lr": 0.1})
    {'db': {'password': '<redacted>', 'url': 'postgres://<redacted>@db/x'}, 'lr': 0.1}
    """
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
    return _redact_strings(value)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """Environment variables with secret-looking ones' values and URL credentials cut out.

    Examples
    --------
    >>> redact_env({"HF_TOKEN": "abc", "DB": "postgres://me:pw@db/x"})
    {'HF_TOKEN': '<redacted>', 'DB': 'postgres://<redacted>@db/x'}
    """
    rule = secret_rule()
    return {k: REDACTED if rule.name(k) else _redact_strings(v) for k, v in env.items()}


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
    rule = secret_rule()  # once: the rule looks up the project's declared names on disk
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
        hiding = rule.name(m.group("name")) and _REFERENCE.match(value) is None
        if hiding:
            newline = "\n" if line.endswith("\n") else ""
            out.append(f"{m.group('lead')}{m.group('name')}={REDACTED}{newline}")
        else:
            out.append(redact_url_credentials(line))
    return "".join(out)


def _redact_word(word: str, rule: SecretRule) -> str:
    m = _WORD_ASSIGNMENT.match(word)
    if m is None:
        return redact_url_credentials(word)
    if rule.name(m.group("name")) and word[: m.end() - 1] not in NOT_SECRET_FLAGS:
        return f"{word[: m.end()]}{REDACTED}"
    return f"{word[: m.end()]}{_redact_word(word[m.end() :], rule)}"  # --env=NAME=value


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
    rule = secret_rule()
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
        rule = secret_rule()
        return "".join(w if w.isspace() else _redact_word(w, rule) for w in words), None
    redacted = redact_argv(argv)
    return (command if redacted == argv else shlex.join(redacted)), redacted


# ---------------------------------------------------------------------------- free text


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
    """``text`` with every value of :func:`secret_env_values` replaced.

    For free text such as a traceback, where secrets cannot be found by their key. One
    pass, longest value first: no value is searched for inside another's replacement.

    Examples
    --------
    >>> redact_secret_values("bad token hunter22", {"API_TOKEN": "hunter22", "LR": "hunter"})
    'bad token <redacted>'
    >>> redact_secret_values("pw12 rejected", {"MUSHIN_SECRET_5CC7921ACE77C467": "pw12"})
    '<redacted> rejected'
    """
    values = sorted(secret_env_values(environ), key=len, reverse=True)
    if not values:
        return text
    return re.sub("|".join(map(re.escape, values)), REDACTED, text)


def redact_exception(exc: BaseException, environ: Mapping[str, str] | None = None) -> None:
    """Replace secret values (:func:`redact_secret_values`) in the string arguments of
    ``exc`` and of the exceptions chained to it, in place.

    Design note: an exception re-raised out of a sweep cell is written elsewhere too:
    submitit pickles its traceback text under the sweep directory, and the driver re-raises
    it to a terminal or CI log. Their last line is ``str(exc)``, built from ``exc.args`` for
    nearly every exception; one whose ``__str__`` ignores its args is left as it is.

    Examples
    --------
    >>> exc = RuntimeError("token pw12 rejected")
    >>> redact_exception(exc, {"MUSHIN_SECRET_5CC7921ACE77C467": "pw12"})
    >>> exc
    RuntimeError('token <redacted> rejected')
    """
    pending, seen = [exc], set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        args = tuple(
            redact_secret_values(a, environ) if isinstance(a, str) else a for a in current.args
        )
        if args != current.args:
            current.args = args
        pending += [e for e in (current.__cause__, current.__context__) if e is not None]
