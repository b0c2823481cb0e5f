# SPDX-License-Identifier: MIT
"""Every subcommand's ``--help`` ends with examples that the real parser accepts, and
``mushin-box completion`` prints a script that a real shell completes with."""

from __future__ import annotations

import importlib
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mushin_box.cli.main import COMMANDS, main, parse_args

#: shell words that end the mushin-box command of an example line (a redirection, a pipe)
_SHELL_OPERATORS = frozenset({">", ">>", "<", "|", "||", "&&", ";", "&"})


def _help(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *argv: str) -> str:
    monkeypatch.setenv("COLUMNS", "100")
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--help"])
    assert exit_.value.code == 0
    return capsys.readouterr().out


def _argv(example: str) -> list[str]:
    """The arguments of the ``mushin-box`` command an example line runs."""
    lexer = shlex.shlex(example, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words = []
    for word in lexer:
        if word in _SHELL_OPERATORS:
            break
        words.append(word)
    assert words[0] == "mushin-box", example
    return words[1:]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_examples(command: str) -> None:
    module = importlib.import_module(f"mushin_box.cli.{command}")
    examples = module.EXAMPLES
    assert examples, f"mushin_box/cli/{command}.py has no EXAMPLES"
    for line in examples:
        assert line.startswith(f"mushin-box {command}"), line


@pytest.mark.parametrize("command", COMMANDS)
def test_help_ends_with_an_example(
    command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = _help(capsys, monkeypatch, command).rstrip().splitlines()
    assert lines[-1].strip().startswith(f"mushin-box {command}"), lines[-4:]
    assert "examples:" in lines


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_no_help_is_taken_for_a_secret(
    command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # the output's secret rule reads KEY=... as a secret's assignment: the help's own text
    # must not look like one (it showed "KEY=<redacted> sweeps")
    assert "<redacted>" not in _help(capsys, monkeypatch, *([command] if command else []))


@pytest.mark.parametrize("command", COMMANDS)
def test_every_example_parses_with_the_real_parser(command: str) -> None:
    module = importlib.import_module(f"mushin_box.cli.{command}")
    for line in module.EXAMPLES:
        try:
            args = parse_args(_argv(line))  # a flag renamed or removed: argparse exits 2
        except SystemExit as exc:
            pytest.fail(f"{line!r} does not parse (exit {exc.code})")
        assert args.command == command, line


def test_the_example_parser_check_catches_a_removed_flag() -> None:
    with pytest.raises(SystemExit):
        parse_args(_argv("mushin-box launch exp.py --no-such-flag 3 lr=0.1"))
    assert _argv("mushin-box completion zsh > ~/x # y") == ["completion", "zsh"]


# ------------------------------------------------------------------------------- completion


def _mushin_box(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mushin_box", *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def bash_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    proc = _mushin_box("completion", "bash")
    assert proc.returncode == 0, proc.stderr
    path = tmp_path_factory.mktemp("completion") / "mushin-box.bash"
    path.write_text(proc.stdout)
    return path


def _complete(script: Path, line: str, cwd: Path | None = None) -> list[str]:
    """What bash completes for the last word of ``line``, from the sourced script's
    completion function (as bash calls it on TAB: COMP_WORDS, COMP_CWORD)."""
    words = line.split(" ")
    code = (
        f"source {shlex.quote(str(script))}\n"
        f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)})\n"
        f"COMP_CWORD={len(words) - 1}\n"
        f"COMP_LINE={shlex.quote(line)}\nCOMP_POINT={len(line)}\n"
        "_shtab_mushin_box\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    proc = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
    )
    assert proc.returncode == 0, proc.stderr
    return [w for w in proc.stdout.splitlines() if w]


pytestmark_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


@pytestmark_bash
@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("mushin-box la", ["launch"]),
        ("mushin-box launch --pro", ["--profile"]),
        ("mushin-box launch exp.py --print", ["--print-config"]),
        ("mushin-box launch exp.py --on-error r", ["raise"]),
        ("mushin-box completion z", ["zsh"]),
    ],
)
def test_bash_completes_subcommands_flags_and_choices(
    bash_script: Path, line: str, expected: list[str]
) -> None:
    assert _complete(bash_script, line) == expected


@pytestmark_bash
def test_bash_completes_paths_where_an_argument_is_one(bash_script: Path, tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    (tmp_path / "run.py").write_text("")
    assert _complete(bash_script, "mushin-box launch exp.py --working-dir ru", tmp_path) == ["runs"]
    assert set(_complete(bash_script, "mushin-box launch ru", tmp_path)) == {"runs", "run.py"}


@pytest.mark.parametrize(
    ("shell", "marker"), [("zsh", "#compdef mushin-box"), ("tcsh", "complete mushin-box")]
)
def test_zsh_and_tcsh_scripts(shell: str, marker: str) -> None:
    # no zsh/tcsh here to run them in: their text names the command and its flags
    proc = _mushin_box("completion", shell)
    assert proc.returncode == 0, proc.stderr
    assert marker in proc.stdout and "print-config" in proc.stdout


def test_help_imports_no_shtab_torch_or_lightning() -> None:
    code = (
        "import sys\n"
        "from mushin_box.cli.main import main\n"
        "for argv in (['--help'], ['launch', '--help'], ['completion', '--help']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print([m for m in ('shtab', 'torch', 'pytorch_lightning') if m in sys.modules])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"


def test_an_unknown_flag_is_named_alone_with_the_subcommand_s_usage(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["launch", "examples/exp.py", "--detach", "--no-wait", "module.lr=0.01,0.1"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: mushin-box launch ")
    assert err.rstrip().endswith("mushin-box launch: error: unrecognized arguments: --no-wait")
