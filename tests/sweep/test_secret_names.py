# SPDX-License-Identifier: MIT
"""Every secret is kept out of every file: short ones quoted in an error, and those under
names outside the built-in words (``passcode``, ``bearer``, ``jwt``...) or declared by the
user (``Workflow(secrets=...)``, ``[tool.mushin-box] secret-names`` in pyproject.toml).

Each test plants values, runs a real sweep, and searches every byte written under its
directory (the way tests/sweep/test_secrets.py does).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, TESTS

from mushin_box._core.layout import (
    ABORT_FILE,
    ERROR_FILE,
    MANIFEST_FILE,
    SECRET_ENV_PREFIX,
    STATUS_FILE,
)
from mushin_box._core.redact import REDACTED

SHORT = "pw12"  # below the minimum length of values found by name only
LONG = "PLANTED-token-4be1c0"


def _h(value: object) -> str:
    return hashlib.sha256(repr(value).encode()).hexdigest()[:16]


def _files_holding(root: Path, planted: tuple[str, ...]) -> list[str]:
    return [
        f"{path.relative_to(root)}: {s}"
        for path in sorted(p for p in root.rglob("*") if p.is_file())
        for s in planted
        if s.encode() in path.read_bytes()
    ]


def quoting_task(lr: float, api_token: str) -> dict[str, float]:
    """Fails for lr < 0 with an error that quotes the token (as an HTTP client would)."""
    if lr < 0:
        raise RuntimeError(f"the server rejected token {api_token}")
    return {"ok": 1.0}


# ---------------------------------------------------------------------------- item 8


@pytest.mark.parametrize("launcher", [None, pytest.param("submitit_local", marks=pytest.mark.slow)])
@pytest.mark.parametrize("secret", [SHORT, LONG])
@pytest.mark.parametrize("on_error", ["nan", "raise"])
def test_a_quoted_secret_is_scrubbed_from_every_error_record(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    secret: str,
    on_error: Any,
    launcher: str | None,
) -> None:
    from mushin_box import Workflow, multirun

    # submitit's workers import the task by reference (this module, beside conftest.py)
    here = Path(__file__).resolve().parent
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(here), str(TESTS), str(REPO)]))
    root = tmp_path / "sweep"
    lr = multirun([0.1, -1.0] if on_error == "nan" else [-1.0])
    kw = {"working_dir": root, "launcher": launcher, "progress": False, "on_error": on_error}
    if on_error == "raise":
        # the task's exception leaves the cell (submitit pickles its text under the sweep,
        # the driver re-raises it): it says <redacted> too
        with pytest.raises(RuntimeError, match=f"rejected token {REDACTED}"):
            Workflow(quoting_task).run(**kw, lr=lr, api_token=secret)
        assert (root / ABORT_FILE).is_file()
    else:
        Workflow(quoting_task).run(**kw, lr=lr, api_token=secret)
    cell = root / "lr=-1.0"
    assert f"rejected token {REDACTED}" in (cell / ERROR_FILE).read_text()
    status = json.loads((cell / STATUS_FILE).read_text())
    assert status["error"]["message"] == f"the server rejected token {REDACTED}"
    manifest = json.loads((root / MANIFEST_FILE).read_text())
    assert f"rejected token {REDACTED}" in json.dumps(manifest)
    assert _files_holding(root, (secret,)) == []
    out, err = capfd.readouterr()
    assert secret not in out + err


# ---------------------------------------------------------------------------- item 9

# keys outside the original word list, a key declared by Workflow(secrets=), a dotted path
# declared there, and a key declared by the project's pyproject.toml
PLANTED = {
    "passcode": "PLANTED-passcode-51c2",
    "bearer": "PLANTED-bearer-0e7d",
    "jwt": "PLANTED-jwt-aa90",
    "private_key": "PLANTED-privkey-3f1b",
    "credentials": "PLANTED-creds-77c4",
    "session_cookie": "PLANTED-cookie-9d02",
    "my_field": "PLANTED-myfield-c3e8",
    "db.dsn": "PLANTED-dsn-6a4f",
    "org_handle": "PLANTED-org-12b7",
}


def named_secrets_task(
    lr: float,
    passcode: str,
    bearer: str,
    jwt: str,
    private_key: str,
    credentials: str,
    session_cookie: str,
    my_field: str,
    db: dict[str, str],
    org_handle: str,
) -> dict[str, float]:
    """Checks, by hash (its own records hold no secret), that every value arrived."""
    got = {
        "passcode": passcode,
        "bearer": bearer,
        "jwt": jwt,
        "private_key": private_key,
        "credentials": credentials,
        "session_cookie": session_cookie,
        "my_field": my_field,
        "db.dsn": db["dsn"],
        "org_handle": org_handle,
    }
    expected = json.loads(os.environ["MUSHIN_TEST_EXPECTED"])
    return {"ok": float({k: _h(v) for k, v in got.items()} == expected), "lr": lr}


def _named_config(values: dict[str, str]) -> Any:
    from hydra_zen import make_config

    plain = {k: v for k, v in values.items() if "." not in k}
    return make_config(lr=0.0, db={"host": "h", "dsn": values["db.dsn"]}, **plain)


def _run_named(root: Path, launcher: str | None, values: dict[str, str], **kw: Any) -> Any:
    from mushin_box import Workflow, multirun

    return Workflow(named_secrets_task, _named_config(values), secrets=["my_field", "db.dsn"]).run(
        working_dir=root, launcher=launcher, progress=False, lr=multirun([0.1, 0.2]), **kw
    )


@pytest.mark.parametrize("launcher", [None, pytest.param("submitit_local", marks=pytest.mark.slow)])
def test_secrets_under_new_and_declared_names_reach_the_task_but_no_file(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    launcher: str | None,
) -> None:
    from mushin_box._core.layout import SECRET_NAMES_ENV

    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[tool.mushin-box]\nsecret-names = ["org_handle"]\n')
    monkeypatch.chdir(project)
    monkeypatch.setenv("MUSHIN_TEST_EXPECTED", json.dumps({k: _h(v) for k, v in PLANTED.items()}))
    # submitit's workers import the task by reference (this module, beside conftest.py)
    here = Path(__file__).resolve().parent
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(here), str(TESTS), str(REPO)]))
    root = project / "sweep"
    ds = _run_named(root, launcher, PLANTED)
    assert ds["ok"].values.tolist() == [1.0, 1.0]  # every rank got every real value
    assert not [k for k in os.environ if k.startswith(SECRET_ENV_PREFIX)]
    assert SECRET_NAMES_ENV not in os.environ  # the carried names end with the launch
    out, err = capfd.readouterr()
    planted = tuple(PLANTED.values())
    assert _files_holding(tmp_path, planted) == []
    assert [s for s in planted if s in out + err] == []

    # new values under the same names are not a new experiment: the cells are reused
    status = root / "lr=0.1" / STATUS_FILE
    first = status.read_bytes()
    other = {k: v.replace("PLANTED", "ROTATED") for k, v in PLANTED.items()}
    monkeypatch.setenv("MUSHIN_TEST_EXPECTED", json.dumps({k: _h(v) for k, v in other.items()}))
    _run_named(root, launcher, other, resume=True)
    assert status.read_bytes() == first
    assert _files_holding(tmp_path, tuple(other.values())) == []


def test_a_sweep_over_a_declared_secret_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    from mushin_box import Workflow, multirun

    with pytest.raises(ValueError, match="cannot sweep over 'my_field'"):
        Workflow(quoting_task, secrets=["my_field"]).run(
            working_dir=tmp_path / "sweep",
            progress=False,
            lr=0.1,
            api_token="t",
            my_field=multirun(["a", "b"]),
        )
    assert not (tmp_path / "sweep").exists()


@pytest.mark.parametrize("secrets", ["my_field", [""], ["a..b"], [None]])
def test_bad_declared_names_are_refused_with_the_fix(secrets: Any) -> None:
    from mushin_box import Workflow

    with pytest.raises(ValueError, match=r"secrets.*e\.g\."):
        Workflow(quoting_task, secrets=secrets)


def test_a_bad_project_setting_refuses_the_run_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mushin_box import Workflow

    (tmp_path / "pyproject.toml").write_text('[tool.mushin-box]\nsecret-names = "org_handle"\n')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="secret-names"):
        Workflow(quoting_task).run(
            working_dir=tmp_path / "sweep", progress=False, lr=0.1, api_token="t"
        )
    assert not (tmp_path / "sweep").exists()


def test_the_cli_refuses_a_bad_project_setting_in_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "pyproject.toml").write_text("[tool.mushin-box]\nsecret-names = [1]\n")
    exp = tmp_path / "wf_exp.py"
    exp.write_text(
        "from mushin_box import Workflow\n\n\ndef task(x: int = 1):\n    return {}\n\n\n"
        "workflow = Workflow(task)\n"
    )
    for extra in (["--working-dir", str(tmp_path / "sweep")], ["--dry-run"]):
        proc = subprocess.run(
            [sys.executable, "-m", "mushin_box", "launch", str(exp), "--local", *extra, "x=2"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=300,
        )
        assert proc.returncode == 2, proc.stderr
        errors = [line for line in proc.stderr.splitlines() if "error" in line]
        assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert errors[0].startswith("mushin-box launch: error: ")
        assert str(tmp_path / "pyproject.toml") in errors[0] and "e.g." in errors[0]
        assert not (tmp_path / "sweep").exists()
