# SPDX-License-Identifier: MIT
"""The secret rule, and redaction by it: :func:`redact` a value, :func:`redact_text` text.

A secret is decided by name (:func:`is_secret_name`: words such as ``token``, unless the last
word only describes it, ``key_dim``), by declaration, or as a URL's credentials. Everything
that writes a file or prints asks this module, so the rule cannot drift between files and the
terminal. Hiding values *before* a launch is :mod:`mushin_box._core.secrets`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from stat import S_ISREG
from typing import Any, NamedTuple

from mushin_box._core.layout import PROJECT_FILE, SECRET_ENV_PREFIX, SECRET_NAMES_ENV

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
_FLAG_WORD = re.compile(r"^-{1,2}(?P<name>[A-Za-z][A-Za-z0-9_-]*)\Z")
#: flags whose name looks secret but whose value is not (Apptainer's working directory)
_NOT_SECRET_FLAGS = frozenset({"--pwd"})
#: environment variables whose names only look secret ("pwd" = password in a config key)
_NOT_SECRET_ENV = frozenset({"PWD", "OLDPWD"})
#: a value found by its variable's name only, and shorter, is not searched for in free
#: text (it would match anywhere); values the vault moved (``MUSHIN_SECRET_*``) always are
MIN_SCRUB_LENGTH = 6
#: a value given to :func:`redact_text` is searched for from this length
_MIN_ARGV_SCRUB = 4
#: a value that only stands for one in a message or a usage line (``KEY=VALUE``)
_PLACEHOLDER = re.compile(r"(?:VALUE|\.\.\.|<[a-z_]+>)[,.;:)\]]*\Z")
#: ``NAME=value`` anywhere in free text: a Hydra override (``+NAME``, ``~NAME``), a flag
#: (``--NAME=``), a dotted path; the value quoted, or up to a space, quote or backslash (a
#: backslash: JSON's escapes stay whole, so redacted JSON stays JSON)
_TEXT_ASSIGNMENT = re.compile(
    r"(?<![\w.+~-])(?:[+~]{1,2}|-{1,2})?(?P<name>[A-Za-z_][\w.-]*)="
    r"(?P<value>'[^'\n]*'|\"[^\"\n]*\"|[^\s'\"\\]*)"
)
_EXAMPLE = '["my_field", "db.dsn"]'


def _words(name: str) -> tuple[str, ...]:
    return tuple(w for w in _SPLIT.split(_BOUNDARY.sub("_", name).lower()) if w)


def check_secret_names(names: Any, *, where: str) -> tuple[str, ...]:
    """``names`` as a tuple, if a list of key names or dotted paths; else a ``ValueError``
    that says where they came from (``where``) and what to write."""
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
    """What is wrong with a TOML file, on one line; nesting past Python's recursion limit is
    the parser's ``RecursionError``, which costs one line too, never a traceback."""
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return " ".join(str(exc).split())


@functools.lru_cache(maxsize=16)
def _read_project(path: str, mtime_ns: int, size: int) -> tuple[str, ...]:
    """The setting of one pyproject.toml, cached until the file changes."""
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
    """``[tool.mushin-box] secret-names`` of the nearest ``pyproject.toml`` at or above
    ``cwd``: the project, as for pip and ruff, even when it lacks the setting."""
    try:  # os.path, not pathlib: the rule asks on every name, this walk must be cheap
        directory = os.getcwd() if cwd is None else os.path.realpath(cwd)
    except OSError:  # the working directory was removed: no project
        return ()
    while True:
        path = os.path.join(directory, PROJECT_FILE)
        with contextlib.suppress(OSError):  # no such file (_read_project reports its own)
            found = os.stat(path)
            if S_ISREG(found.st_mode):
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
    """The names a driver carried here (``SECRET_NAMES_ENV``), else the project's; ``declared``."""
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
def _compile_rule(names: tuple[str, ...]) -> SecretRule:
    split = [tuple(_words(part) for part in name.split(".")) for name in names]
    return SecretRule(
        frozenset(p[0] for p in split if len(p) == 1), frozenset(p for p in split if len(p) > 1)
    )


def _secret_rule(declared: Sequence[str] = ()) -> SecretRule:
    return _compile_rule(secret_names_in_effect(declared))


def is_secret_name(name: str, declared: Sequence[str] = ()) -> bool:
    """Does a config key, a dotted config path or an environment variable name look like
    it holds a secret? A path is, when any key along it is or it starts with a declared
    path; ``declared`` names (besides :func:`secret_names_in_effect`'s) match whatever the
    spelling (``my_field``, ``MY_FIELD``, ``myField``).

    >>> [is_secret_name(n) for n in ("WANDB_API_KEY", "hfToken", "credentials.user", "lr")]
    [True, True, True, False]

    A last word that describes the secret instead of holding it makes it no secret, unless
    the name was declared:

    >>> [is_secret_name(n) for n in ("key_dim", "pad_token_id", "api_key_path", "auth_url")]
    [False, False, False, False]
    >>> is_secret_name("sessionId", ["session_id"])
    True
    >>> [is_secret_name(p, ["db.dsn"]) for p in ("db.dsn", "db.dsn.user", "cache.db.dsn")]
    [True, True, False]
    """
    return _secret_rule(declared).path(name)


#: files that hold credentials by convention, whatever the words of their names: dotenv
#: files, ``.netrc``/``.pgpass``, SSH keys, and key or certificate stores by their suffix
_SECRET_FILE = re.compile(
    r"^(?:\.env(?:\..*)?|\.netrc|\.pgpass|id_(?:rsa|dsa|ecdsa|ed25519)(?:\.pub)?)\Z"
    r"|\.(?:pem|key|p12|pfx|jks|keystore|asc|gpg)\Z"
)


def is_secret_file(path: str) -> bool:
    """Does a file's name (not its directory's) say it holds secrets? A name of the
    conventions above, or whose stem is a secret's name, a plural too (``secrets.yaml``).

    >>> [is_secret_file(p) for p in (".env", "conf/.env.local", "secrets.yaml", "tls.pem")]
    [True, True, True, True]
    >>> [is_secret_file(p) for p in ("train.py", "tokenizer.py", "secrets/model.py")]
    [False, False, False]
    """
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    stem = name.split(".", 1)[0]
    if _SECRET_FILE.search(name):
        return True
    return bool(stem) and (is_secret_name(stem) or is_secret_name(stem.removesuffix("s")))


def _redact_urls(text: str) -> str:
    if "@" not in text or "://" not in text:
        return text
    return URL_CREDENTIALS.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", text)


def redact(value: Any, declared: Sequence[str] = ()) -> Any:
    """A copy of ``value`` with its secrets cut out: of a mapping, a secret-looking key's
    value unless ``None`` ("unset" is worth seeing) and URL credentials; of a command's words,
    an assignment's value (``--name=value``, ``+name=value``) and the word after a
    secret-looking flag; a string by :func:`redact_text`; an exception itself, its and its
    chain's args scrubbed in place (submitit pickles its traceback; the driver re-raises it).

    >>> redact({"db": {"password": "hunter2", "url": "postgres://me:pw@db/x"}, "lr": 0.1})
    {'db': {'password': '<redacted>', 'url': 'postgres://<redacted>@db/x'}, 'lr': 0.1}
    >>> redact(["apptainer", "--env", "HF_TOKEN=abc", "--pwd", "/w", "--password", "x"])
    ['apptainer', '--env', 'HF_TOKEN=<redacted>', '--pwd', '/w', '--password', '<redacted>']
    """
    if isinstance(value, BaseException):
        pending, seen = [value], set()
        while pending:
            current = pending.pop()
            if id(current) in seen:
                continue
            seen.add(id(current))
            args = tuple(redact_text(a) if isinstance(a, str) else a for a in current.args)
            if args != current.args:
                current.args = args
            pending += [e for e in (current.__cause__, current.__context__) if e is not None]
        return value
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, list | tuple) and value and all(isinstance(v, str) for v in value):
        return _redact_argv(value, _secret_rule(declared))
    return _redact(value, _secret_rule(declared), ())


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
    m = _TEXT_ASSIGNMENT.match(word)  # the assignment of text; its value: the word's rest
    if m is None:
        return _redact_urls(word)
    head = word[: m.start("value")]
    if rule.path(m.group("name")) and head[:-1] not in _NOT_SECRET_FLAGS:
        return f"{head}{REDACTED}"
    return f"{head}{_redact_word(word[len(head) :], rule)}"  # --env=NAME=value


def _redact_argv(argv: Sequence[str], rule: SecretRule) -> list[str]:
    out: list[str] = []
    hide = False  # the word after a secret-looking flag
    for word in argv:
        flag = None if hide else _FLAG_WORD.match(word)
        out.append(REDACTED if hide else _redact_word(word, rule))
        hide = flag is not None and word not in _NOT_SECRET_FLAGS and rule.name(flag["name"])
    return out


def _quote_state(text: str, state: str | None) -> str | None:
    """The shell quote still open at the end of ``text`` (``"'"``, ``'"'`` or ``None``), from
    ``state`` at its start: a backslash escapes the next character, except in single quotes."""
    chars = iter(text)
    for c in chars:
        if c == "\\" and state != "'":
            next(chars, None)
        elif state is None and c in "'\"":
            state = c
        elif c == state:
            state = None
    return state


def _redact_env_lines(text: str, rule: SecretRule) -> str:
    """A secret-looking ``NAME=value`` line whose quoted value spans lines keeps the name
    only, its continuation lines dropped (one line is the assignment pass's)."""
    out: list[str] = []
    open_quote: str | None = None
    hiding = False
    for line in text.splitlines(keepends=True):
        if open_quote is not None:  # inside a value that spans lines
            open_quote = _quote_state(line, open_quote)
            if hiding:
                continue
        elif m := _ASSIGNMENT.match(line):
            open_quote = _quote_state(line[m.end() :], None)
            hiding = open_quote is not None and rule.name(m.group("name"))
            if hiding:
                newline = "\n" if line.endswith("\n") else ""
                line = f"{m.group('lead')}{m.group('name')}={REDACTED}{newline}"
        out.append(line)
    return "".join(out)


def _unquoted(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _is_reference(value: str) -> bool:
    """``${oc.env:NAME}``, ``${NAME:?}`` and the like: names where a secret is, holds none
    (``${NAME:-default}`` holds its default)."""
    inner = _unquoted(value)
    return inner.startswith("${") and inner.endswith("}") and ":-" not in inner


def _assignment(m: re.Match[str], rule: SecretRule) -> str:
    value = m.group("value")
    kept = not value or value.startswith(REDACTED) or _is_reference(value)
    if kept or _PLACEHOLDER.match(value) or not rule.path(m.group("name")):  # KEY=VALUE
        return m.group(0)
    return m.group(0)[: m.start("value") - m.start(0)] + REDACTED


class TextRedactor:
    """:func:`redact_text` with the rule and the values read once (``mushin_box.cli.output``
    cleans every line a command prints with one). A given value under 4 characters is not
    searched for: it would match inside unrelated words. ``lenient``: a broken project
    setting is told in ``problem`` and the built-in rule used, for printing must not fail.

    >>> clean = TextRedactor(["hunter22"], environ={})
    >>> clean("write +x.api_key=hunter22: got [hunter22 and https://me:pw@h/ lr=0.1")
    'write +x.api_key=<redacted>: got [<redacted> and https://<redacted>@h/ lr=0.1'
    """

    def __init__(
        self,
        values: Iterable[str] = (),
        environ: Mapping[str, str] | None = None,
        *,
        lenient: bool = False,
    ) -> None:
        #: why the project's secret names could not be read (``lenient`` only)
        self.problem: str | None = None
        try:
            self.rule = _secret_rule()
            found = _secret_env_values(environ)
        except ValueError as exc:
            if not lenient:
                raise
            self.problem = str(exc)
            self.rule, found = _compile_rule(()), set()
        found |= {v for v in values if len(v) >= _MIN_ARGV_SCRUB}
        # longest first: no value is matched inside another
        ordered = sorted(found - {"", REDACTED}, key=len, reverse=True)
        self._values = re.compile("|".join(map(re.escape, ordered))) if ordered else None

    def __call__(self, text: str) -> str:
        if "=" in text:
            text = _redact_env_lines(text, self.rule)
        if self._values is not None:
            text = self._values.sub(REDACTED, text)
        if "=" in text:
            text = _TEXT_ASSIGNMENT.sub(lambda m: _assignment(m, self.rule), text)
        return _redact_urls(text)


def redact_text(
    text: str, environ: Mapping[str, str] | None = None, values: Iterable[str] = ()
) -> str:
    """``text`` with its secrets cut out: a secret-looking ``NAME=value`` keeps the name only
    (a quoted value across lines too; a reference such as ``${oc.env:NAME}`` is kept), the
    values of ``environ``'s secret-looking variables (:data:`MIN_SCRUB_LENGTH`) and
    ``values`` are replaced wherever they stand, and URL credentials are cut out.

    >>> print(redact_text("# rank env\\nLR=0.1\\nWANDB_API_KEY='abc\\ndef'\\n"
    ...                   'HF_TOKEN="${HF_TOKEN:?}"\\nDB=postgres://me:pw@db/x\\n'), end="")
    # rank env
    LR=0.1
    WANDB_API_KEY=<redacted>
    HF_TOKEN="${HF_TOKEN:?}"
    DB=postgres://<redacted>@db/x
    >>> redact_text("got +x.api_key=hunter22 and hunter22", {}, ["hunter22"])
    'got +x.api_key=<redacted> and <redacted>'
    >>> redact_text("bad token hunter22", {"API_TOKEN": "hunter22", "LR": "hunter"})
    'bad token <redacted>'
    """
    return TextRedactor(values, environ)(text)


def _secret_env_values(environ: Mapping[str, str] | None = None) -> set[str]:
    env = os.environ if environ is None else environ
    rule = _compile_rule(secret_names_in_effect(environ=env))
    out: set[str] = set()
    for k, v in env.items():
        if not v:
            continue
        if SECRET_ENV_PREFIX in k:  # a known secret: a short one is still a secret
            out.add(v)
        elif rule.name(k) and k not in _NOT_SECRET_ENV and len(v) >= MIN_SCRUB_LENGTH:
            out.add(v)
    return out


def command_line_secrets(argv: Sequence[str], declared: Sequence[str] = ()) -> set[str]:
    """The values a command line gives secret-looking names (``+api_key=abc``,
    ``--token abc``; as written, unquoted, and each of a comma list), so that a message that
    quotes one back can be cleaned; a broken project setting leaves the built-in rule.

    >>> sorted(command_line_secrets(["launch", "x.py", "+db.password=hunter2", "lr=0.1",
    ...                              "--token", "abcd1234", "api_key='${oc.env:K}'"]))
    ['abcd1234', 'hunter2']
    """
    try:
        rule = _secret_rule(declared)
    except ValueError:
        rule = _compile_rule(())
    out: set[str] = set()
    hide = False  # the word after a secret-looking flag
    for word in argv:
        if hide and not word.startswith("-"):
            out.add(word)
            hide = False
            continue
        flag = _FLAG_WORD.match(word)
        hide = flag is not None and word not in _NOT_SECRET_FLAGS and rule.name(flag["name"])
        m = _TEXT_ASSIGNMENT.match(word)
        if m and rule.path(m["name"]) and not _is_reference(value := word[m.start("value") :]):
            out |= {value, _unquoted(value), *(_unquoted(v) for v in value.split(","))}
    return {v for v in out if v and not _is_reference(v)}
