# SPDX-License-Identifier: MIT
"""A mistyped flag or subcommand names the closest real one (as override typos do), and a
sweep Hydra cannot enumerate is refused in one line."""

from __future__ import annotations

import pytest
from conftest import REPO

from mushin_box.cli.main import main


@pytest.mark.parametrize(
    ("argv", "wanted"),
    [
        (["launch", "exp.py", "--partion", "gpu"], "--partion (did you mean '--partition'?)"),
        (["status", "--jsn"], "--jsn (did you mean '--json'?)"),
        (["stauts"], "invalid choice: 'stauts'"),
        (["lunch", "exp.py"], "(did you mean 'launch'?)"),
    ],
)
def test_a_typo_names_the_closest(
    argv: list[str], wanted: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert wanted in err, err
    if argv[0] == "stauts":
        assert "(did you mean 'status'?)" in err


def test_no_suggestion_for_a_flag_far_from_every_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["status", "--zzzzzzzz"])
    err = capsys.readouterr().err
    assert "unrecognized arguments: --zzzzzzzz" in err and "did you mean" not in err


@pytest.mark.parametrize("dry", [True, False])
def test_an_interval_sweep_is_a_one_line_refusal(
    dry: bool, cleandir, capsys: pytest.CaptureFixture[str]
) -> None:
    exp = str(REPO / "examples" / "exp.py")
    argv = ["launch", exp, "--local", "module.lr=interval(0.1,1)", "--working-dir", "sweep"]
    code = main([*argv, *(["--dry-run"] if dry else [])])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "interval() sweep" in err and "module.lr=0.1,0.5,1" in err
    assert not (cleandir / "sweep").exists()
