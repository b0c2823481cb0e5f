# SPDX-License-Identifier: MIT
"""The secret rule (which names hold secrets) and the error-text scrub.

The rule decides what the vault hides before a launch and what every record redacts, so a
name it misses is written in clear everywhere. The property tests spell the rule as a user
reads it in the docs: any secret word in the name makes it secret, unless the last word
only describes the secret; names the user declares (``Workflow(secrets=...)``, the
project's ``[tool.mushin-box] secret-names``) are secret whatever their words.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mushin_box._core.layout import SECRET_ENV_PREFIX
from mushin_box._core.redact import (
    MIN_SCRUB_LENGTH,
    REDACTED,
    SECRET_NAMES_ENV,
    _quote_state,
    is_secret_name,
    project_secret_names,
    redact,
    redact_text,
    secret_names_in_effect,
)

pytestmark = pytest.mark.floor  # the floor job's subset (scripts/floor)

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
    assert is_secret_name(f"model.{name}.inner"), name  # a whole node under it is secret


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
    assert is_secret_name(f"a.{_spell(words, style)}.b", [declared])  # at any depth
    # another name that only starts or ends like it is not
    assert is_secret_name(f"{declared}_x", [declared]) == is_secret_name(f"{declared}_x")


def test_a_declared_dotted_path_is_secret_from_the_root_only() -> None:
    assert is_secret_name("db.dsn", ["db.dsn"])
    assert is_secret_name("db.dsn.user", ["db.dsn"])  # and everything under it
    assert not is_secret_name("cache.db.dsn", ["db.dsn"])
    assert not is_secret_name("db", ["db.dsn"])
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
    assert is_secret_name("ORG_HANDLE") and is_secret_name("team.orgHandle")
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
    assert redact_text(text, env) == (
        f"token {REDACTED} rejected; {REDACTED} too; abc stays; lr {REDACTED}x"
    )


def test_a_value_inside_the_marker_is_not_replaced_twice() -> None:
    env = {f"{SECRET_ENV_PREFIX}A": "hunter2", f"{SECRET_ENV_PREFIX}B": "red"}
    assert redact_text("hunter2 red", env) == f"{REDACTED} {REDACTED}"


# ---------------------------------------------------------------------------- issue 19
# Each test below kills mutants of redact.py that survived the group's tests
# (docs/testing.md, "Surviving mutants").


def test_redact_env_hides_secret_values_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SECRET_NAMES_ENV, raising=False)
    env = {"HF_TOKEN": "abc", "LR": "0.1", "DB": "postgres://me:pw@db/x", "KEY_DIM": "64"}
    assert redact(env) == {
        "HF_TOKEN": REDACTED,
        "LR": "0.1",
        "DB": f"postgres://{REDACTED}@db/x",
        "KEY_DIM": "64",
    }


def test_url_credentials_are_cut_from_every_url_and_nothing_else() -> None:
    text = "a https://u:p@h/x b ftp://tok@f c mail me@example.org d s3://bucket/k@v"
    assert redact(text) == (
        f"a https://{REDACTED}@h/x b ftp://{REDACTED}@f c mail me@example.org d s3://bucket/k@v"
    )
    assert redact("no url @ here") == "no url @ here"
    assert redact("https://h/x") == "https://h/x"


def test_a_secret_containing_another_is_replaced_whole() -> None:
    # the regex alternation takes the first value that matches at a position: the longer
    # value must come first, or "hunter" matches and "22" of "hunter22" is left in clear
    env = {"A_TOKEN": "hunter", "B_TOKEN": "hunter22", "C_TOKEN": "hunter2"}
    for text in ("hunter22", "hunter2", "hunter"):
        assert redact_text(f"x {text} y", env) == f"x {REDACTED} y"


def test_values_of_secret_names_are_scrubbed_from_the_minimum_length() -> None:
    long_enough = "a" * MIN_SCRUB_LENGTH
    env = {"API_TOKEN": long_enough, "OTHER_TOKEN": "b" * (MIN_SCRUB_LENGTH - 1), "PWD": "/w/dir"}
    short = "b" * (MIN_SCRUB_LENGTH - 1)
    # PWD is a directory, not a password
    assert redact_text(f"{long_enough} {short} /w/dir", env) == f"{REDACTED} {short} /w/dir"
    assert redact_text("nothing to hide", {}) == "nothing to hide"


def test_the_names_given_win_over_the_process_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SECRET_NAMES_ENV, raising=False)
    monkeypatch.chdir(tmp_path)  # no pyproject.toml up from here... unless /tmp has one
    here = project_secret_names()
    project = _project(tmp_path / "p", '[tool.mushin-box]\nsecret-names = ["org_handle"]\n')
    assert project_secret_names(project) == ("org_handle",)  # cwd given: the process's ignored
    assert project_secret_names() == here
    carried = {SECRET_NAMES_ENV: '["carried_name"]'}
    assert secret_names_in_effect(environ=carried) == ("carried_name",)
    assert secret_names_in_effect(["x"], environ=carried) == ("carried_name", "x")
    # the environ given decides which values are secret, too
    assert redact_text("s3cr3tvalue", {**carried, "CARRIED_NAME": "s3cr3tvalue"}) == REDACTED


def test_chained_exceptions_are_scrubbed_and_a_cycle_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(f"{SECRET_ENV_PREFIX}A", "pw12")
    cause, context = ValueError("cause pw12", 3), KeyError("context pw12")
    exc = RuntimeError("top pw12")
    exc.__cause__, exc.__context__ = cause, context
    context.__context__ = exc  # a cycle: each exception is scrubbed once, and it ends
    assert redact(exc) is exc
    assert exc.args == (f"top {REDACTED}",)
    assert cause.args == (f"cause {REDACTED}", 3)
    assert context.args == (f"context {REDACTED}",)
    plain = OSError(2, "no such file")  # nothing to scrub: args (and errno) untouched
    redact(plain)
    assert plain.errno == 2 and plain.args == (2, "no such file")


# ---------------------------------------------------------------------------- env files


@pytest.mark.parametrize(
    ("text", "state"),
    [
        ("abc", None),
        ("'abc", "'"),
        ('"abc', '"'),
        ("'a\"b'", None),  # a double quote inside single quotes closes nothing
        ('"a\'b"', None),
        ("\\'abc", None),  # an escaped quote opens nothing
        ('"a\\"b', '"'),  # an escaped quote inside double quotes closes nothing
        ("'a\\'", None),  # a backslash inside single quotes escapes nothing
        ("x'", "'"),
        ("a\\'b", None),  # a backslash after the first character escapes too
        ("\\a'", "'"),  # it escapes one character, not two
        ('"\\a"', None),  # the same inside double quotes
        ("X", None),  # only quotes open a quote
    ],
)
def test_quote_state_follows_the_shell(text: str, state: str | None) -> None:
    assert _quote_state(text, None) == state
    assert _quote_state("", state) == state
    assert _quote_state("rest'", "'") is None and _quote_state('rest"', '"') is None


def test_env_text_hides_secret_assignments_across_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SECRET_NAMES_ENV, raising=False)
    text = (
        "# comment https://u:p@h\n"
        "export API_TOKEN='line1\n"
        "line2 https://u:p@h\n"
        "line3'\n"
        '  DB_PASSWORD="a\\"b\n'
        'c"\n'
        'NOTE="first https://u:p@h\n'
        'second https://v:q@h"\n'
        'HF_TOKEN="${HF_TOKEN:?}"\n'
        "GH_TOKEN=${GH_TOKEN:?}\n"
        "LR=0.1\n"
        "SECRET_KEY=last"
    )
    assert redact_text(text) == (
        f"# comment https://{REDACTED}@h\n"
        f"export API_TOKEN={REDACTED}\n"
        f"  DB_PASSWORD={REDACTED}\n"
        f'NOTE="first https://{REDACTED}@h\n'
        f'second https://{REDACTED}@h"\n'
        'HF_TOKEN="${HF_TOKEN:?}"\n'
        "GH_TOKEN=${GH_TOKEN:?}\n"
        "LR=0.1\n"
        f"SECRET_KEY={REDACTED}"
    )
    # a reference followed by more is a value, and is hidden
    assert redact_text('HF_TOKEN="${HF_TOKEN:?}x"\n') == f"HF_TOKEN={REDACTED}\n"


# ---------------------------------------------------------------------------- commands


def test_argv_hides_secret_words_and_the_word_after_a_secret_flag(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(SECRET_NAMES_ENV, raising=False)
    argv = [
        "run",
        "--token",
        "abc",
        "--lr",
        "0.1",
        "--pwd",
        "/w",
        "--pwd=/w",
        "--api-key=k",
        "--env=HF_TOKEN=abc",
        "--env=LR=0.1",
        "HF_TOKEN=abc",
        "-p",
        "x",
        "git+https://u:p@h/r",
        "--auth",
        "--token",
    ]
    assert redact(argv) == [
        "run",
        "--token",
        REDACTED,
        "--lr",
        "0.1",
        "--pwd",
        "/w",
        "--pwd=/w",
        f"--api-key={REDACTED}",
        f"--env=HF_TOKEN={REDACTED}",
        "--env=LR=0.1",
        f"HF_TOKEN={REDACTED}",
        "-p",
        "x",
        f"git+https://{REDACTED}@h/r",
        "--auth",
        REDACTED,  # the word after --auth, even if it looks like a flag
    ]


def test_a_command_hides_hydra_overrides_as_the_text_rule_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A rank's command holds Hydra overrides: ``+key=``, ``++key=``, ``~key=`` and dotted
    or declared paths are assignments in a command's words as in text."""
    monkeypatch.delenv(SECRET_NAMES_ENV, raising=False)
    argv = ["python", "t.py", "+api_key=abc", "++db.password=x", "~token=y", "db.dsn=u", "lr=1"]
    assert redact(argv, ["db.dsn"]) == [
        "python",
        "t.py",
        f"+api_key={REDACTED}",
        f"++db.password={REDACTED}",
        f"~token={REDACTED}",
        f"db.dsn={REDACTED}",
        "lr=1",
    ]
    assert [redact_text(w, {}) for w in argv[2:5]] == redact(argv)[2:5]


def test_a_command_is_redacted_whether_or_not_it_splits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SECRET_NAMES_ENV, raising=False)
    plain = ["python", "train.py", "--lr", "0.1"]  # nothing to hide
    assert redact(plain) == plain
    assert redact(["run", "--token", "a b", "HF_TOKEN=x"]) == [
        "run",
        "--token",
        REDACTED,
        f"HF_TOKEN={REDACTED}",
    ]
    # unbalanced quotes: the command as text, the spacing kept
    assert redact_text("run  HF_TOKEN=x 'oops\thttps://u:p@h", environ={}) == (
        f"run  HF_TOKEN={REDACTED} 'oops\thttps://{REDACTED}@h"
    )


def test_an_empty_value_does_not_end_the_search(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SECRET_NAMES_ENV, raising=False)
    env = {"A_TOKEN": "", f"{SECRET_ENV_PREFIX}B": "", "C_TOKEN": "longsecret"}
    assert redact_text("x longsecret", env) == f"x {REDACTED}"


def test_lists_are_redacted_item_by_item_and_paths_count_indices() -> None:
    value = {"runs": [{"dsn": "a", "token": "t"}, {"dsn": "b"}, "https://u:p@h", 3]}
    assert redact(value, ["runs.0.dsn"]) == {
        "runs": [{"dsn": REDACTED, "token": REDACTED}, {"dsn": "b"}, f"https://{REDACTED}@h", 3]
    }


def test_an_edited_project_setting_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The setting is cached by the file's mtime and size: an edit that keeps either one
    is still seen."""
    monkeypatch.delenv(SECRET_NAMES_ENV, raising=False)
    path = _project(tmp_path, '[tool.mushin-box]\nsecret-names = ["aaaa"]\n') / "pyproject.toml"
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    assert project_secret_names(tmp_path) == ("aaaa",)
    path.write_text('[tool.mushin-box]\nsecret-names = ["bbbb"]\n')  # same size
    os.utime(path, ns=(2_000_000_000, 2_000_000_000))
    assert project_secret_names(tmp_path) == ("bbbb",)
    path.write_text('[tool.mushin-box]\nsecret-names = ["cc"]\n')  # same mtime
    os.utime(path, ns=(2_000_000_000, 2_000_000_000))
    assert project_secret_names(tmp_path) == ("cc",)


def test_bad_declared_names_are_refused_naming_where_they_came_from() -> None:
    with pytest.raises(ValueError, match=r"^declared secret names must be a list"):
        is_secret_name("x", "my_field")  # type: ignore[arg-type]
