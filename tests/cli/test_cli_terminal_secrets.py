# SPDX-License-Identifier: MIT
"""Nothing secret reaches a terminal: every line a command prints is cleaned by the rule
files are cleaned by (issue 29, section 3). A failed launch's "run only those again" hint,
Hydra's refusals, the dry run's ``"errors"`` and argparse's messages all used to quote a
secret override back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mushin_box._core.redact import TextRedactor, command_line_secrets

SECRET, PASSWORD = "hunter2-xyz", "s3cret-pw-42"

FAILING = """
from mushin_box import Workflow


def task(x: int = 1) -> dict:
    raise RuntimeError("boom")


workflow = Workflow(task)
"""

PASSING = FAILING.replace('raise RuntimeError("boom")', 'return {"y": float(x)}')


def _launch(exp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if "MUSHIN_SECRET" not in k}
    return subprocess.run(
        [sys.executable, "-m", "mushin_box", "launch", str(exp), "--local", "--no-progress"]
        + list(args),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=exp.parent,
        env={**env, "COLUMNS": "200"},
    )


def _clean(proc: subprocess.CompletedProcess[str]) -> str:
    both = proc.stdout + proc.stderr
    assert SECRET not in both and PASSWORD not in both, both[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return both


def test_the_hint_after_a_failed_launch_redacts_secrets_and_says_how_to_pass_them(
    tmp_path: Path,
) -> None:
    exp = tmp_path / "failing.py"
    exp.write_text(FAILING)
    proc = _launch(exp, f"+api_key={SECRET}", f"+db.password={PASSWORD}", "--working-dir", "sweep")
    assert proc.returncode == 1, proc.stderr[-3000:]
    _clean(proc)
    hint = proc.stderr[proc.stderr.index("to run only those again") :]
    # resume replays the recorded launch; a secret's value is not recorded, and the way
    # to pass it again is said
    assert f"mushin-box resume {tmp_path / 'sweep'} --set '+api_key=${{oc.env:API_KEY}}'" in hint
    assert "secret values are not recorded" in hint
    record = (tmp_path / "sweep" / "mushin_launch.json").read_text()
    assert "+api_key=<redacted>" in record and "+db.password=<redacted>" in record


@pytest.mark.parametrize(
    "override",
    [
        f"x.api_key={SECRET}",  # Hydra: "To append to your config use +x.api_key=..."
        f"+api_key=[{SECRET}",  # Hydra's parser: "no viable alternative at input '[...'"
        f"password={SECRET},other",  # not a field: "write +password=..."
    ],
)
def test_a_refused_secret_override_is_not_echoed(tmp_path: Path, override: str) -> None:
    exp = tmp_path / "passing.py"
    exp.write_text(PASSING)
    proc = _launch(exp, override, "--working-dir", "sweep")
    assert proc.returncode == 2, proc.stderr[-3000:]
    _clean(proc)
    assert "mushin-box launch: error: " in proc.stderr
    dry = _launch(exp, override, "--working-dir", "sweep", "--dry-run", "--json")
    assert dry.returncode == 2, dry.stderr[-3000:]
    _clean(dry)
    if dry.stdout.strip():  # the review, when the plan got that far, with its errors
        assert json.loads(dry.stdout)["errors"]


def test_the_dry_run_of_a_secret_override_shows_a_reference(tmp_path: Path) -> None:
    exp = tmp_path / "passing.py"
    exp.write_text(PASSING)
    proc = _launch(exp, f"+api_key={SECRET}", "--working-dir", "sweep", "--dry-run", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    _clean(proc)
    assert json.loads(proc.stdout)["overrides"][0].startswith("+api_key=")


def test_argparse_messages_are_cleaned_too(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mushin_box", "status", f"--api-key={SECRET}"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert SECRET not in proc.stderr and "--api-key=<redacted>" in proc.stderr


def test_the_text_rule_keeps_what_is_no_secret() -> None:
    clean = TextRedactor(command_line_secrets(["+api_key=abcd1234", "lr=0.1"]), environ={})
    # a reference is the way to pass a secret: kept; a describing name is no secret
    for text in ("+api_key='${oc.env:API_KEY}'", "api_key_path=/k lr=0.1 key_dim=64"):
        assert clean(text) == text
    # JSON stays JSON: a value ends at an escaped quote
    line = json.dumps({"e": 'write "+api_key=abcd1234" here'})
    assert json.loads(clean(line)) == {"e": 'write "+api_key=<redacted>" here'}
    assert clean("token=xy in https://u:p@h/x") == "token=<redacted> in https://<redacted>@h/x"
