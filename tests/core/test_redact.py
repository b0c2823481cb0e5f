# SPDX-License-Identifier: MIT
"""The secret rule (which names hold secrets) and the error-text scrub.

The rule decides what the vault hides before a launch and what every record redacts, so a
name it misses is written in clear everywhere. The property tests spell the rule as a user
reads it in the docs: any secret word in the name makes it secret, unless the last word
only describes the secret; names the user declares (``Workflow(secrets=...)``, the
project's ``[tool.mushin-box] secret-names``) are secret whatever their words.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mushin_box._core.layout import SECRET_ENV_PREFIX
from mushin_box._core.redact import (
    MIN_SCRUB_LENGTH,
    REDACTED,
    SECRET_NAMES_ENV,
    is_secret_name,
    is_secret_path,
    project_secret_names,
    redact,
    redact_secret_values,
)

# the secret words of the docs (docs/workflow.md "What is secret"), as the words of a name
SECRET_WORDS = [
    ("token",),
    ("secret",),
    ("password",),
    ("passwd",),
    ("pwd",),
    ("key",),
    ("apikey",),
    ("auth",),
    ("credential",),
    ("credentials",),
    ("passphrase",),
    ("cookie",),
    ("passcode",),
    ("passkey",),
    ("bearer",),
    ("jwt",),
    ("private", "key"),
    ("session", "cookie"),
    ("access", "token"),
    ("client", "secret"),
]
# last words that say what a value is about (an id, a size, where it lives...)
DESCRIBING = ["id", "ids", "len", "length", "size", "dim", "path", "file", "url", "type", "name"]
# prefix words: anything that is neither secret nor describing
PREFIX = st.lists(
    st.from_regex(r"\A[a-z]{2,7}\Z").filter(
        lambda w: not is_secret_name(w) and w not in DESCRIBING
    ),
    min_size=0,
    max_size=2,
)


def _spell(words: list[str], style: str) -> str:
    """One name in a style users write: snake, SCREAMING, camelCase, PascalCase, kebab."""
    if style == "snake":
        return "_".join(words)
    if style == "upper":
        return "_".join(words).upper()
    if style == "kebab":
        return "-".join(words)
    caps = "".join(w.upper() if w == "jwt" else w.capitalize() for w in words)
    return caps if style == "pascal" else words[0] + caps[len(words[0]) :]


STYLE = st.sampled_from(["snake", "upper", "kebab", "camel", "pascal"])


@given(prefix=PREFIX, secret=st.sampled_from(SECRET_WORDS), style=STYLE)
def test_a_name_with_a_secret_word_is_secret(
    prefix: list[str], secret: tuple[str, ...], style: str
) -> None:
    name = _spell([*prefix, *secret], style)
    assert is_secret_name(name), name
    assert is_secret_path(f"model.{name}.inner"), name  # a whole node under it is secret


@given(
    prefix=PREFIX,
    secret=st.sampled_from(SECRET_WORDS),
    last=st.sampled_from(DESCRIBING),
    style=STYLE,
)
def test_a_name_ending_with_a_describing_word_is_no_secret(
    prefix: list[str], secret: tuple[str, ...], last: str, style: str
) -> None:
    name = _spell([*prefix, *secret, last], style)
    assert not is_secret_name(name), name


@given(secret=st.sampled_from(SECRET_WORDS), digits=st.integers(0, 99))
def test_a_number_after_the_secret_word_keeps_it_secret(
    secret: tuple[str, ...], digits: int
) -> None:
    assert is_secret_name("_".join(secret) + str(digits))  # password2, api_key1


@pytest.mark.parametrize(
    "name",
    ["pin_memory", "max_tokens", "num_keys", "tokenizer", "monkey", "keyboard_layout", "authors"],
)
def test_hyperparameters_stay_plain(name: str) -> None:
    assert not is_secret_name(name)


# ---------------------------------------------------------------------------- names added


NAME = st.lists(st.from_regex(r"\A[a-z]{2,7}\Z"), min_size=1, max_size=3)


@given(words=NAME, style=STYLE)
def test_a_declared_name_is_secret_in_every_spelling(words: list[str], style: str) -> None:
    declared = "_".join(words)
    assert is_secret_name(_spell(words, style), ["other", declared])
    assert is_secret_path(f"a.{_spell(words, style)}.b", [declared])  # at any depth
    # another name that only starts or ends like it is not
    assert is_secret_name(f"{declared}_x", [declared]) == is_secret_name(f"{declared}_x")


def test_a_declared_dotted_path_is_secret_from_the_root_only() -> None:
    assert is_secret_path("db.dsn", ["db.dsn"])
    assert is_secret_path("db.dsn.user", ["db.dsn"])  # and everything under it
    assert not is_secret_path("cache.db.dsn", ["db.dsn"])
    assert not is_secret_path("db", ["db.dsn"])
    assert redact({"db": {"dsn": "x", "host": "h"}}, ["db.dsn"]) == {
        "db": {"dsn": REDACTED, "host": "h"}
    }
    # a declared name overrides the describing-last-word rule: the user said so
    assert not is_secret_name("session_id") and is_secret_name("sessionId", ["session_id"])


@pytest.mark.parametrize("bad", [[""], ["a..b"], ["."], [3], "my_field"])
def test_bad_declared_names_are_refused_with_the_fix(bad: object) -> None:
    with pytest.raises(ValueError, match=r"e\.g\. .*my_field"):
        is_secret_name("x", bad)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- the project's


def _project(root: Path, text: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(text)
    return root


def test_the_nearest_pyproject_declares_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SECRET_NAMES_ENV, raising=False)
    project = _project(tmp_path / "p", '[tool.mushin-box]\nsecret-names = ["org_handle"]\n')
    (project / "src" / "deep").mkdir(parents=True)
    monkeypatch.chdir(project / "src" / "deep")  # at or above the working directory
    assert project_secret_names() == ("org_handle",)
    assert is_secret_name("ORG_HANDLE") and is_secret_path("team.orgHandle")
    # a nearer pyproject.toml without the setting is the project: nothing declared
    _project(project / "src", "[project]\nname = 'inner'\n")
    assert project_secret_names() == () and not is_secret_name("org_handle")
    # the driver's names, carried to the ranks, win over whatever the rank's cwd holds
    monkeypatch.setenv(SECRET_NAMES_ENV, '["carried"]')
    assert is_secret_name("carried") and not is_secret_name("org_handle")


@pytest.mark.parametrize(
    "text",
    [
        '[tool.mushin-box]\nsecret-names = "org_handle"\n',
        "[tool.mushin-box]\nsecret-names = [1]\n",
        '[tool.mushin-box]\nsecret-names = ["a..b"]\n',
        "[tool.mushin-box\n",
    ],
)
def test_a_bad_project_setting_is_refused_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    monkeypatch.delenv(SECRET_NAMES_ENV, raising=False)
    monkeypatch.chdir(_project(tmp_path, text))
    with pytest.raises(ValueError) as refused:
        is_secret_name("lr")
    message = str(refused.value)  # one line: the file, the problem, the fix
    assert str(tmp_path / "pyproject.toml") in message and "e.g." in message
    assert "\n" not in message


# ---------------------------------------------------------------------------- free text


def test_vault_values_are_scrubbed_whatever_their_length() -> None:
    env = {
        f"{SECRET_ENV_PREFIX}5CC7921ACE77C467": "pw12",  # moved there by the vault
        f"APPTAINERENV_{SECRET_ENV_PREFIX}00AA": "q9",  # the same, as a rank's host has it
        f"{SECRET_ENV_PREFIX}EMPTY": "",
        "MY_SERVICE_TOKEN": "abc",  # found by its name only: below the minimum, kept
        "LR": "pw12x",
    }
    text = "token pw12 rejected; q9 too; abc stays; lr pw12x"
    assert len("abc") < MIN_SCRUB_LENGTH
    assert redact_secret_values(text, env) == (
        f"token {REDACTED} rejected; {REDACTED} too; abc stays; lr {REDACTED}x"
    )


def test_a_value_inside_the_marker_is_not_replaced_twice() -> None:
    env = {f"{SECRET_ENV_PREFIX}A": "hunter2", f"{SECRET_ENV_PREFIX}B": "red"}
    assert redact_secret_values("hunter2 red", env) == f"{REDACTED} {REDACTED}"
