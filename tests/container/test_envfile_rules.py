# SPDX-License-Identifier: MIT
"""The env-file evaluator of the tests (``tests/standins/envfile.py``): Apptainer's rules,
not bash's.

Apptainer evaluates ``--env-file`` with an embedded Go shell interpreter, not bash; the two
disagree on a backslash outside double quotes (``A='it'\\''s'``: bash ``it's``, Apptainer
``it\\'s``). The evaluator accepts only what both read alike and refuses the rest, and every
value the rank wrapper writes must come back byte for byte from it AND from bash. Apptainer
itself is not run here.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import STANDINS, run_doctests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_rankwrap import NAMES, RANK5, VALUES

from mushin_box._container.launchspec import ContainerLaunch
from mushin_box._container.rankwrap import plan_env_file, render_env_file

sys.path.insert(0, str(STANDINS))  # as the stand-in imports it
import envfile  # noqa: E402  # pyright: ignore[reportMissingImports]
from envfile import EnvFileError, evaluate_env_file  # noqa: E402  # pyright: ignore[reportMissingImports]

BASH = shutil.which("bash")
# bash, as the shell that forgave the old spelling: `set -a; source FILE`, then each name
_BASH_PRINT = 'set -a; source "$1"; shift; for n; do printf "%s\\0" "${!n}"; done'


def _bash(text: str, host: dict[str, str], names: list[str]) -> dict[str, str]:
    """What bash's ``set -a; source FILE`` assigns to ``names``."""
    assert BASH is not None
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "a.env"
        path.write_text(text, encoding="utf-8")
        proc = subprocess.run(
            [BASH, "--noprofile", "--norc", "-c", _BASH_PRINT, "bash", str(path), *names],
            env=host,
            capture_output=True,
            check=True,
        )
    values = proc.stdout.split(b"\0")[:-1]
    return {n: v.decode("utf-8", "surrogateescape") for n, v in zip(names, values, strict=True)}


# -- what is accepted --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", {}),
        ("\n  \n\t\n", {}),
        ("# a comment, with 'quotes' and $(not run) \\ `x`\n", {}),
        ("A=plain_safe.chars,:/@%+=-09\n", {"A": "plain_safe.chars,:/@%+=-09"}),
        ("export A=1\nexport\tB=2\n", {"A": "1", "B": "2"}),
        ("A=\nB=''\n", {"A": "", "B": ""}),
        ("A='it'\"'\"'s'\n", {"A": "it's"}),
        ('A="\'"\n', {"A": "'"}),
        ("A='$HOME `x` \\ \" ; # ~'\n", {"A": '$HOME `x` \\ " ; # ~'}),
        ("A='two\nlines'\nB=2\n", {"A": "two\nlines", "B": "2"}),
        ('A="${RANK:?}"\n', {"A": "5"}),
        ("A=${RANK:?}\n", {"A": "5"}),
        ('A=r${RANK:?}-"${RANK:?}${RANK:?}"\n', {"A": "r5-55"}),
        ('A="${MISSING:-}"\nB="${MISSING:-0}"\nC=${EMPTY:-d/e}\n', {"A": "", "B": "0", "C": "d/e"}),
        ('A="${RANK:-9}"\n', {"A": "5"}),
        ("A=1\nB=${A:?}\nA=2\nC=${A:?}\n", {"A": "2", "B": "1", "C": "2"}),  # allexport
        ("RANK=7\nB=${RANK:?}\n", {"RANK": "7", "B": "7"}),  # the file shadows the host
        ("A=1", {"A": "1"}),  # no final newline
    ],
)
def test_accepted_constructs_and_their_values(text: str, expected: dict[str, str]) -> None:
    host = {"RANK": "5", "EMPTY": "", "HOME": "/home/a"}
    assert evaluate_env_file(text, host) == expected
    # and bash agrees (only what the file assigns is compared; bash exports the rest too)
    assert _bash(text, host, list(expected)) == expected


def test_the_commands_arguments_are_the_positional_parameters() -> None:
    text = 'A="${1:?}"\nB=${2:-none}\n'
    assert evaluate_env_file(text, {}, ["first"]) == {"A": "first", "B": "none"}
    with pytest.raises(EnvFileError, match="^1: $"):
        evaluate_env_file(text, {})


def test_host_variables_are_visible_but_not_exported() -> None:
    assert evaluate_env_file("A=${SECRET:?}x\n", {"SECRET": "s", "OTHER": "o"}) == {"A": "sx"}


# -- what is refused ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("A='it'\\''s'\n", "backslash outside single quotes"),  # the old spelling
        ("A=a\\\\b\n", "backslash outside single quotes"),
        ("A=\\'\n", "backslash outside single quotes"),
        ("A=$(id -u)\n", "execution is disabled"),
        ("A=$((1+2))\n", "execution is disabled"),
        ("A=`id`\n", "backtick"),
        ("A=a b\n", "unquoted whitespace"),
        ("A=1 \n", "unquoted whitespace"),
        ("A=1 # trailing comment\n", "unquoted whitespace"),
        ('A="x"\n', "double-quoted content"),
        ('A="${B:?} x"\n', "double-quoted content"),
        ('A="\\""\n', "double-quoted content"),
        ('A=""\n', "double-quoted content"),
        ("A=$B\n", "'$' that is not"),
        ("A=${B}\n", "'$' that is not"),
        ("A=${B:?custom message}\n", "'$' that is not"),
        ("A=${B:=x}\n", "'$' that is not"),
        ("A=${B:-a b}\n", "'$' that is not"),
        ("A=${#B}\n", "'$' that is not"),
        ("A=$'x'\n", "'$' that is not"),
        ("A=~/x\n", "unquoted character '~'"),
        ("A=x;B=2\n", "unquoted character ';'"),
        ("A=*\n", "unquoted character '*'"),
        ("A=é\n", "unquoted character 'é'"),
        ("A='unterminated\n", "unterminated single quote"),
        ("A=1\r\n", "carriage return"),
        ("A='1\r'\n", "carriage return"),
        ("A='\x00'\n", "NUL"),
        ("# comment\r\n", "carriage return"),
        ("ls -l\n", "execution is disabled"),
        ("export A\n", "not an assignment"),
        ("unset A\n", "not an assignment"),
        (" A=1\n", "leading whitespace"),
        ("A =1\n", "not an assignment"),
        ("1A=1\n", "not an assignment"),
        ("readonly A=1\n", "not an assignment"),
        ("A=1 B=2\n", "unquoted whitespace"),
    ],
)
def test_refused_constructs_name_the_line(text: str, reason: str) -> None:
    text = "# first line\nOK=1\n" + text
    with pytest.raises(EnvFileError) as refused:
        evaluate_env_file(text, {"B": "b"})
    message = str(refused.value)
    assert message.startswith("line 3: ") and reason in message, message
    assert "\n" not in message and refused.value.lineno == 3
    assert refused.value.exit_status is None and refused.value.printed == ""


def test_a_refused_line_after_a_multiline_value_is_numbered_right() -> None:
    with pytest.raises(EnvFileError, match=r"^line 4: "):
        evaluate_env_file("A='1\n2\n3'\nB=$(x)\n", {})


# -- ${X:?}: what Apptainer prints -------------------------------------------------------------


@pytest.mark.parametrize("host", [{}, {"CUDA_VISIBLE_DEVICES": ""}], ids=["unset", "empty"])
@pytest.mark.parametrize("quoted", [True, False])
def test_a_required_variable_fails_as_apptainer_reports_it(
    host: dict[str, str], quoted: bool
) -> None:
    ref = '"${CUDA_VISIBLE_DEVICES:?}"' if quoted else "${CUDA_VISIBLE_DEVICES:?}"
    with pytest.raises(EnvFileError) as failed:
        evaluate_env_file(f"A=1\nCUDA_VISIBLE_DEVICES={ref}\nB=2\n", host)
    error = failed.value
    # Apptainer's interpreter prints "NAME: " and the evaluation ends with "exit status 1"
    # (bash would say "parameter null or not set": not what a user of Apptainer sees)
    assert str(error) == "CUDA_VISIBLE_DEVICES: "
    assert error.printed == "CUDA_VISIBLE_DEVICES: \n"
    assert (error.exit_status, error.status_text, error.lineno) == (1, "exit status 1", 2)


def test_a_default_never_fails() -> None:
    assert evaluate_env_file('A="${X:-}"\n', {}) == {"A": ""}


# -- every value the writer writes comes back (and bash agrees) ---------------------------------


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(env=st.dictionaries(NAMES, VALUES, min_size=1, max_size=4), no_eval=st.booleans())
def test_every_written_value_comes_back_byte_for_byte(env: dict[str, str], no_eval: bool) -> None:
    """The alphabet of ``test_every_env_value_survives_both_evaluations`` (test_rankwrap)."""
    spec = ContainerLaunch(image="/i.sif", project_dir="/p", env=env, no_eval=no_eval, nv=False)
    text = render_env_file(spec, run_id="r $1 'q' \"d\" `x`", sif_sha256="ab")
    mine = evaluate_env_file(text, RANK5)
    assert _bash(text, RANK5, list(mine)) == mine  # bash and the evaluator agree
    if no_eval:  # one evaluation, on the host: the exact bytes
        assert {k: mine[k] for k in env} == env
        assert mine["MUSHIN_RUN_ID"] == "r $1 'q' \"d\" `x`"
    else:  # escaped for the container's second evaluation, inside "..."
        escaped = {
            k: v.replace("\\", "\\\\").replace("$", "\\$").replace("`", "\\`")
            for k, v in env.items()
        }
        assert {k: mine[k] for k in env} == escaped


@pytest.mark.parametrize(
    "image", ["/my images/i.sif", "/it's/i.sif", "/a 'b' \"c\" $d `e` \\f/i.sif"]
)
@pytest.mark.parametrize("no_eval", [True, False])
def test_the_rank_command_is_written_in_the_shared_subset(image: str, no_eval: bool) -> None:
    spec = ContainerLaunch(image=image, project_dir="/p", no_eval=no_eval, infiniband=False)
    text = plan_env_file(spec, working_dir="/p").text
    mine = evaluate_env_file(text, RANK5)
    assert _bash(text, RANK5, list(mine)) == mine
    assert "'\\''" not in text


def test_the_old_spelling_is_refused_where_bash_forgave_it() -> None:
    old = "A='it'\\''s'\n"
    assert _bash(old, {}, ["A"]) == {"A": "it's"}  # bash: fine
    with pytest.raises(EnvFileError, match="backslash"):  # Apptainer: it\'s
        evaluate_env_file(old, {})


def test_module_doctests() -> None:
    result = run_doctests(envfile)
    assert result.failed == 0 and result.attempted >= 5
