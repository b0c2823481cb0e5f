# SPDX-License-Identifier: MIT
"""The dry run's sbatch script shows what a reviewer checks (the ``#SBATCH`` lines and the
``srun`` line) and folds the host-side requeue trap, the same in every launch, to one line;
``--verbose`` shows it whole, and ``--json`` always holds it."""

from __future__ import annotations

import json
from pathlib import Path

from test_cli_launch import EXP, launch
from test_cli_launch_refusals import assert_one_line_refusal

_ARGS = (str(EXP), "--nodes", "2", "--gpus", "4", "--slurm", "--dry-run", "module.lr=0.01,0.1")


def _script(out: str) -> list[str]:
    """The sbatch section of a dry run's text."""
    section = out.split("--- the sbatch job array (what submitit will submit)\n")[1]
    return section.split("\n\n(reviewed in")[0].split("\n--- the env file")[0].splitlines()


def test_the_requeue_trap_is_folded_and_verbose_shows_it(tmp_path: Path) -> None:
    work = ("--working-dir", str(tmp_path / "sweep"))
    folded = launch(*_ARGS, *work)
    assert folded.returncode == 0, folded.stderr
    script = _script(folded.stdout)
    assert "#SBATCH --nodes=2" in script and "#SBATCH --ntasks-per-node=4" in script
    assert any(line.startswith("srun --unbuffered") for line in script)
    notes = [line for line in script if "requeue trap" in line]
    assert len(notes) == 1 and notes[0].startswith("# [the requeue trap, ")
    assert "requeue_on=preemption max_requeues=3; --verbose shows it]" in notes[0]
    assert not any("__mushin_" in line for line in script)

    verbose = launch(*_ARGS, *work, "--verbose")
    assert verbose.returncode == 0, verbose.stderr
    whole = _script(verbose.stdout)
    assert "trap __mushin_on_signal USR2" in whole and "srun() {" in whole
    assert not any("requeue trap, " in line for line in whole)
    # the fold took the trap's lines out and nothing else
    count = int(notes[0].split("requeue trap, ")[1].split(" lines")[0])
    assert len(whole) == len(script) - 1 + count
    assert [line for line in script if line != notes[0]] == [
        line for line in whole if line in script
    ]

    review = json.loads(launch(*_ARGS, *work, "--json").stdout)
    assert "trap __mushin_on_signal USR2" in review["sbatch"]  # data keeps it all


def test_verbose_without_dry_run_is_refused(tmp_path: Path) -> None:
    proc = launch(str(EXP), "--verbose", "--working-dir", str(tmp_path / "sweep"))
    assert_one_line_refusal(proc, "--verbose shows the whole dry run: add --dry-run")
    assert not (tmp_path / "sweep").exists()
