# SPDX-License-Identifier: MIT
"""``reproduce``: a completed cell re-run from its sidecars, checked, then diffed.

The tasks live in modules written under ``tmp_path`` (outside any git checkout, unless a
test makes one), so the code check sees only what the test changes.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import re
import shutil
import subprocess
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

from mushin_box import Workflow, multirun, reproduce
from mushin_box._core.layout import PROVENANCE_FILE, STATUS_FILE
from mushin_box._core.secrets import SecretVault
from mushin_box._core.sidecars import canonical_dumps, read_json, write_json_atomic
from mushin_box._reproduce.checks import ReproduceError
from mushin_box.cli.main import main

SECRET = "s3cr3t-value-for-reproduce"
TOKEN_VAR = SecretVault.env_name("api_token")

TASK_SOURCE = """
def task(lr: float, seed: int = 0, api_token: str = "", given: str = "") -> dict:
    import hashlib
    import random

    rng = random.Random(seed)
    digest = hashlib.sha256((api_token or given).encode()).hexdigest()
    assert digest == "{digest}", "the secret did not arrive"
    return {{"loss": lr * rng.random(), "steps": [rng.random() for _ in range(3)]}}


def seed_ranks(cfg) -> None:
    pass
"""


def _module(directory: Path, source: str = TASK_SOURCE) -> Any:
    """A fresh module (unique name) holding ``task`` and ``seed_ranks``, importable."""
    name = f"rtask_{uuid.uuid4().hex[:8]}"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.py").write_text(
        textwrap.dedent(source.format(digest=hashlib.sha256(SECRET.encode()).hexdigest()))
    )
    return importlib.import_module(name)


@pytest.fixture
def code_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "code"
    d.mkdir()
    monkeypatch.syspath_prepend(str(d))
    return d


def _cell(module: Any, root: Path, *, secret: bool = True) -> Path:
    """Run a 2-cell sweep of ``module.task`` (a secret in its config, unless ``secret`` is
    False: then the task gets the secret's value as a plain parameter); return one cell."""
    Workflow(module.task, pre_call=module.seed_ranks).run(
        working_dir=root,
        progress=False,
        lr=multirun([0.1, 0.2]),
        seed=7,
        **({"api_token": SECRET} if secret else {"given": SECRET}),
    )
    return root / "lr=0.2"


def _files_hold(root: Path, text: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


def test_a_completed_cell_is_reproduced(
    tmp_path: Path, code_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cell = _cell(_module(code_dir), tmp_path / "sweep")
    monkeypatch.setenv(TOKEN_VAR, SECRET)  # the secret comes back from the environment
    into = tmp_path / "again"

    result = reproduce(cell, into=into)

    assert result.ok, result.to_dict()
    assert result.cell_dir == into / "lr=0.2"
    assert result.diff.reproducible and result.diff.metrics_match
    assert read_json(_dir(result) / "mushin_metrics.json") == read_json(
        cell / "mushin_metrics.json"
    )
    old, new = read_json(cell / PROVENANCE_FILE), read_json(_dir(result) / PROVENANCE_FILE)
    assert canonical_dumps(old["reproducibility"]) == canonical_dumps(new["reproducibility"])
    assert new["reproducibility"]["seed"]["base"] == 7
    reproduction = new["run"]["reproduction"]
    assert reproduction["of"] == str(cell)
    sha = hashlib.sha256((cell / PROVENANCE_FILE).read_bytes()).hexdigest()
    assert reproduction["provenance_sha256"] == sha
    assert reproduction["allow_dirty"] is False
    assert new["run"]["task"]["pre_call"]["qualname"] == "seed_ranks"
    assert result.plan.secrets == (TOKEN_VAR,)
    assert _files_hold(tmp_path, SECRET) == []  # the value is in no file written


def test_a_missing_secret_is_named_and_nothing_is_written(tmp_path: Path, code_dir: Path) -> None:
    cell = _cell(_module(code_dir), tmp_path / "sweep")
    with pytest.raises(ReproduceError, match=f"'api_token'.*{TOKEN_VAR}"):
        reproduce(cell, into=tmp_path / "again")
    assert not (tmp_path / "again").exists()


def test_changed_task_source_refused_naming_no_hash_then_allowed_and_recorded(
    tmp_path: Path, code_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _module(code_dir)
    cell = _cell(module, tmp_path / "sweep")
    monkeypatch.setenv(TOKEN_VAR, SECRET)
    recorded = read_json(cell / PROVENANCE_FILE)["reproducibility"]["code"]["task_sha256"]
    path = Path(module.__file__)
    path.write_text(path.read_text() + "\n# an edit after the run\n")

    with pytest.raises(ReproduceError, match="code fingerprint") as refused:
        reproduce(cell, into=tmp_path / "again")
    # no fingerprint a forger could write into a record to make it pass
    assert not re.search("[0-9a-f]{64}", str(refused.value))
    assert "allow_dirty=True" in str(refused.value)  # reproduce()'s own words (the CLI's: --)
    assert not (tmp_path / "again").exists()

    # the task's code is not the code that ran: its secret is not handed to it
    with pytest.raises(ReproduceError, match=f"secrets \\({TOKEN_VAR}\\).*only to the code"):
        reproduce(cell, into=tmp_path / "again", allow_dirty=True)
    assert not (tmp_path / "again").exists()

    cell = _cell(module, tmp_path / "plain", secret=False)  # run after the edit
    path.write_text(path.read_text() + "\n# a second edit\n")
    recorded = read_json(cell / PROVENANCE_FILE)["reproducibility"]["code"]["task_sha256"]
    result = reproduce(cell, into=tmp_path / "again", allow_dirty=True)
    now = read_json(_dir(result) / PROVENANCE_FILE)["reproducibility"]["code"]["task_sha256"]
    record = read_json(_dir(result) / PROVENANCE_FILE)
    assert record["run"]["reproduction"]["allow_dirty"] is True
    assert recorded in record["run"]["reproduction"]["code_differences"][0]
    assert record["reproducibility"]["code"]["task_sha256"] == now
    # the metrics match, but the code does not: not reproduced, and the row says why
    assert result.diff.metrics_match and not result.ok
    assert [f.path for f in result.diff.breaks] == ["reproducibility.code.task_sha256"]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def _committed(code_dir: Path) -> Any:
    """A fresh task module, committed in a new git repository."""
    if shutil.which("git") is None:  # pragma: no cover - git is on every CI image
        pytest.skip("git is not installed")
    module = _module(code_dir)
    _git(code_dir, "init", "-q")
    _git(code_dir, "add", ".")
    _git(code_dir, "commit", "-qm", "task")
    return module


def _a_commit_after_the_run(tmp_path: Path, code_dir: Path, edit: Any) -> tuple[Path, str, str]:
    """A cell run at a first commit, then ``edit(module)`` committed: (cell, both commits)."""
    module = _committed(code_dir)
    first = _git(code_dir, "rev-parse", "HEAD")
    cell = _cell(module, tmp_path / "sweep")
    edit(module)
    _git(code_dir, "commit", "-qm", "after the run")
    return cell, first, _git(code_dir, "rev-parse", "HEAD")


def test_a_commit_that_changed_none_of_the_code_is_reproduced_and_said(
    tmp_path: Path,
    code_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def notes(module: Any) -> None:  # a commit that changes no code
        (code_dir / "NOTES.md").write_text("later\n")
        _git(code_dir, "add", ".")

    cell, first, second = _a_commit_after_the_run(tmp_path, code_dir, notes)
    monkeypatch.setenv(TOKEN_VAR, SECRET)

    result = reproduce(cell, into=tmp_path / "again")
    assert result.ok, result.diff.verdict()
    moved = read_json(_dir(result) / PROVENANCE_FILE)["run"]["reproduction"]
    assert moved["checkout_differences"] == [
        f"the cell ran at commit {first}, but {second} is checked out"
    ]
    assert not moved["allow_dirty"] and moved["code_differences"] == []
    # the commits differ, as expected: the experiment's code (its fingerprint) is the same
    assert "reproducibility.code.git.commit" in [f.path for f in result.diff.cells[0].expected]
    capsys.readouterr()
    assert main(["reproduce", str(cell), "--into", str(tmp_path / "cli")]) == 0
    said = capsys.readouterr().out
    assert f"code      the cell's (the cell ran at commit {first}, but {second} is checked " in said


def test_a_commit_that_changed_the_code_is_refused_with_the_checkout_to_run(
    tmp_path: Path, code_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def change(module: Any) -> None:  # a commit that changes the task's own file
        path = Path(module.__file__)
        path.write_text(path.read_text() + "\n# changed\n")
        _git(code_dir, "add", ".")

    cell, first, second = _a_commit_after_the_run(tmp_path, code_dir, change)
    monkeypatch.setenv(TOKEN_VAR, SECRET)

    with pytest.raises(ReproduceError) as refused:
        reproduce(cell, into=tmp_path / "again")
    said = str(refused.value)
    assert f"commit {first}, but {second} is checked out" in said
    assert f"check the commit out: git -C {code_dir} switch --detach {first}" in said
    assert not (tmp_path / "again").exists()
    _git(code_dir, "switch", "-q", "--detach", first)  # as the refusal said
    assert reproduce(cell, into=tmp_path / "again").ok


def test_a_file_git_does_not_show_must_still_be_the_commits_blob(
    tmp_path: Path, code_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _committed(code_dir)
    cell = _cell(module, tmp_path / "sweep")
    path = Path(module.__file__)
    _git(code_dir, "update-index", "--skip-worktree", path.name)  # git diff HEAD: nothing
    marker = tmp_path / "ran"
    path.write_text(f"open({str(marker)!r}, 'w').close()\n" + path.read_text())
    monkeypatch.setenv(TOKEN_VAR, SECRET)
    with pytest.raises(ReproduceError, match=f"{path} differ.s. from commit") as refused:
        reproduce(cell, into=tmp_path / "again", dry_run=True)
    assert "\n" not in str(refused.value) and not marker.exists()


@pytest.mark.parametrize(
    ("state", "said"),
    [
        ("failed", "is failed: ValueError: boom"),
        ("running", "is running"),
    ],
)
def test_a_cell_that_did_not_complete_is_refused(
    tmp_path: Path, code_dir: Path, state: str, said: str
) -> None:
    cell = _cell(_module(code_dir), tmp_path / "sweep")
    status = read_json(cell / STATUS_FILE)
    error = {"type": "ValueError", "message": "boom"} if state == "failed" else None
    write_json_atomic(cell / STATUS_FILE, {**status, "status": state, "error": error})
    with pytest.raises(ReproduceError, match=f"{said}.*only a completed cell"):
        reproduce(cell, into=tmp_path / "again")


def test_not_a_cell_and_a_sweep_are_refused(tmp_path: Path, code_dir: Path) -> None:
    root = tmp_path / "sweep"
    _cell(_module(code_dir), root)
    with pytest.raises(ReproduceError, match="is a sweep directory; give one of its cells"):
        reproduce(root)
    with pytest.raises(ReproduceError, match="no such directory"):
        reproduce(tmp_path / "nope")
    for atol in (-1, math.nan, math.inf, 10**400):  # each a refusal before anything runs
        with pytest.raises(ReproduceError, match="atol must be a finite number >= 0"):
            reproduce(root / "lr=0.1", atol=atol)


def test_dry_run_checks_and_writes_nothing(
    tmp_path: Path, code_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cell = _cell(_module(code_dir), tmp_path / "sweep")
    monkeypatch.setenv(TOKEN_VAR, SECRET)
    result = reproduce(cell, into=tmp_path / "again", dry_run=True)
    assert result.cell_dir is None and result.diff is None and not result.ok
    plan = result.plan.to_dict()
    assert plan["combo"] == {"lr": 0.2} and plan["seed_base"] == 7
    assert plan["launcher"]["mode"] == "local" and plan["launcher"]["recorded"] == "basic"
    assert plan["topology"]["nodes"] == plan["topology"]["gpus"] == 1
    assert plan["code"]["same"] and plan["image"]["recorded"] == "no image"
    assert plan["config"]["api_token"] == f"${{oc.env:{TOKEN_VAR}}}"
    assert not (tmp_path / "again").exists()
    with pytest.raises(ReproduceError, match="original's own sweep"):
        reproduce(cell, into=tmp_path / "sweep", dry_run=True)


def _as_if_in_image(cell: Path, sif_sha256: str, path: str) -> None:
    """Make the cell's record say it ran on SLURM in the image ``sif_sha256`` at ``path``
    (the image check runs before any launch, so no cluster is needed to test it)."""
    record = read_json(cell / PROVENANCE_FILE)
    record["reproducibility"]["image"] = {"sif_sha256": sif_sha256}
    record["run"]["image"] = {"path": path}
    record["run"]["launcher"]["name"] = "mushin_slurm"
    write_json_atomic(cell / PROVENANCE_FILE, record)


def test_an_image_of_other_content_is_refused_naming_both_digests(
    tmp_path: Path, code_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conftest import standin_image

    from mushin_box._image.sif import file_sha256

    cell = _cell(_module(code_dir), tmp_path / "sweep")
    monkeypatch.setenv(TOKEN_VAR, SECRET)
    with pytest.raises(ReproduceError, match="ran in no image.*drop image="):
        reproduce(cell, into=tmp_path / "again", image=str(tmp_path / "x.sif"))

    (tmp_path / "images").mkdir()
    image = standin_image(tmp_path / "images")  # the Apptainer stand-in's test SIF
    want = file_sha256(image)
    _as_if_in_image(cell, want, str(image))
    other = tmp_path / "other.sif"
    other.write_bytes(image.read_bytes() + b"\0")  # a SIF of different content
    got = file_sha256(other)
    with pytest.raises(ReproduceError, match=f"sha256 {got}, but the cell ran in sha256 {want}"):
        reproduce(cell, into=tmp_path / "again", image=str(other))
    image.unlink()  # and not where it was recorded, nor given
    with pytest.raises(ReproduceError, match=f"image \\(sha256 {want}\\) is not where"):
        reproduce(cell, into=tmp_path / "again")
    assert not (tmp_path / "again").exists()


def test_the_task_location_is_recorded(tmp_path: Path, code_dir: Path) -> None:
    module = _module(code_dir)
    cell = _cell(module, tmp_path / "sweep")
    located = read_json(cell / PROVENANCE_FILE)["run"]["task"]
    assert located["task"] == {
        "module": module.__name__,
        "qualname": "task",
        "file": str(Path(module.__file__).resolve()),
        "partial": False,
    }
    assert json.dumps(located)  # plain JSON


@pytest.mark.slow
def test_a_two_rank_cell_reproduced_at_one_rank_and_back(tmp_path: Path) -> None:
    """examples/exp.py, 2 HydraDDP CPU ranks, reproduced at 1 rank: the reproducibility part
    is identical (topology is `run`); then the 1-rank re-run reproduced at 2 ranks, which
    gives the original's exact metrics. Each step is its own process, as a user runs them."""
    import os
    import sys

    from conftest import REPO

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        argv = [sys.executable, "-m", "mushin_box", *args]
        return subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True)

    exp = str(REPO / "examples" / "exp.py")
    launched = cli(
        "launch",
        exp,
        "--gpus",
        "2",
        "--local",
        "--working-dir",
        "two",
        "--no-progress",
        "trainer.max_epochs=1",
        "seed=1",
    )
    assert launched.returncode == 0, launched.stderr[-2000:]
    cell = tmp_path / "two" / "cell"  # nothing swept: one cell

    # the task is mushin-box's fit_task, so the git state recorded is this checkout's:
    # --allow-dirty keeps the test stable while the checkout is edited (a clean CI
    # checkout has no break at all)
    def again(source: Path, into: str, gpus: int) -> dict[str, Any]:
        done = cli(
            "reproduce", str(source), "--into", into, "--gpus", str(gpus), "--allow-dirty", "--json"
        )
        assert done.returncode in (0, 1), done.stderr[-2000:]
        return json.loads(done.stdout)

    one = again(cell, "one", 1)
    breaks = {f["path"] for c in one["diff"]["cells"] for f in c["breaks_reproducibility"]}
    assert breaks <= {"reproducibility.code.git.diff_sha256"}, breaks
    new = Path(one["cell_dir"])
    assert read_json(new / PROVENANCE_FILE)["run"]["topology"]["world_size"] == 1
    back = again(new, "back", 2)
    breaks = {f["path"] for c in back["diff"]["cells"] for f in c["breaks_reproducibility"]}
    assert breaks <= {"reproducibility.code.git.diff_sha256"}, breaks
    rerun = Path(back["cell_dir"])
    assert read_json(rerun / PROVENANCE_FILE)["run"]["topology"]["world_size"] == 2
    # same world size, same data per rank: the original's numbers
    assert read_json(rerun / "mushin_metrics.json") == read_json(cell / "mushin_metrics.json")


def _dir(result: Any) -> Path:
    assert result.cell_dir is not None, result.error
    return result.cell_dir


def _breaks(result: Any) -> set[str]:
    return {f.path for f in result.diff.breaks}


def _a_dirty_run_then_a_commit(
    tmp_path: Path, code_dir: Path, untracked: bool = False
) -> tuple[Path, str, str]:
    """A cell run on uncommitted changes (a helper module git does not track, when
    ``untracked``), then the tree committed with one more edit: (cell, first commit,
    the recorded diff's sha256)."""
    module = _committed(code_dir)
    first = _git(code_dir, "rev-parse", "HEAD")
    path = Path(module.__file__)
    path.write_text(path.read_text() + "\n# uncommitted when it ran\n")
    if untracked:
        (code_dir / "helper_kept.py").write_text("VALUE = 1\n")
        path.write_text(path.read_text() + "from helper_kept import VALUE  # noqa\n")
    cell = _cell(module, tmp_path / "sweep")
    path.write_text(path.read_text() + "\n# a later edit\n")
    _git(code_dir, "add", "-A")
    _git(code_dir, "commit", "-qm", "after the run")
    git = read_json(cell / PROVENANCE_FILE)["reproducibility"]["code"]["git"]
    return cell, first, git["diff_sha256"]


@pytest.mark.parametrize("untracked", [False, True], ids=["tracked", "with-untracked"])
def test_a_dirty_runs_code_comes_back_from_the_sweeps_copy(
    tmp_path: Path,
    code_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    untracked: bool,
) -> None:
    cell, first, sha = _a_dirty_run_then_a_commit(tmp_path, code_dir, untracked)
    kept = tmp_path / "sweep" / ".mushin" / "code" / f"{sha}.patch"
    assert hashlib.sha256(kept.read_bytes()).hexdigest() == sha
    assert kept.stat().st_mode & 0o777 == 0o600
    monkeypatch.setenv(TOKEN_VAR, SECRET)

    with pytest.raises(ReproduceError) as refused:
        reproduce(cell, into=tmp_path / "again")
    said = str(refused.value)
    commands = said.split("on a clean tree: ")[1].split(". Or pass")[0]
    assert commands.startswith(
        f"git -C {code_dir} switch --detach {first} && git -C {code_dir} apply {kept}"
    ), said
    assert ("-c " in commands) == untracked  # the untracked file is written by a step of its own
    assert not (tmp_path / "again").exists()
    capsys.readouterr()
    assert main(["reproduce", str(cell), "--into", str(tmp_path / "cli")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and commands in err and "--allow-dirty" in err
    assert "Check out the cell's code" not in err  # the ways back above say how, once

    subprocess.run(commands, shell=True, check=True, capture_output=True)  # as it says
    result = reproduce(cell, into=tmp_path / "again")
    assert result.ok, result.diff.verdict()
    assert read_json(_dir(result) / "mushin_metrics.json") == read_json(
        cell / "mushin_metrics.json"
    )


def test_a_sweeps_copy_that_is_not_the_recorded_code_is_not_offered(
    tmp_path: Path, code_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cell, _, sha = _a_dirty_run_then_a_commit(tmp_path, code_dir)
    kept = tmp_path / "sweep" / ".mushin" / "code" / f"{sha}.patch"
    kept.write_bytes(kept.read_bytes() + b"+import os; os.system('boom')\n")
    monkeypatch.setenv(TOKEN_VAR, SECRET)
    with pytest.raises(ReproduceError, match="is not the code the cell ran") as refused:
        reproduce(cell, into=tmp_path / "again")
    assert " apply " not in str(refused.value)
    kept.unlink()
    with pytest.raises(ReproduceError, match="the sweep keeps no copy of that code"):
        reproduce(cell, into=tmp_path / "again")


def _forget(code_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As a new process would: no module of the test's imported, its trees not on the
    path."""
    import sys

    tmp = str(code_dir.parent)
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(tmp):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if not p.startswith(tmp)])


@pytest.mark.parametrize("untracked", [False, True], ids=["tracked", "with-untracked"])
def test_a_dirty_runs_code_reruns_from_a_worktree_leaving_the_tree_as_it_is(
    tmp_path: Path,
    code_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    untracked: bool,
) -> None:
    cell, first, sha = _a_dirty_run_then_a_commit(tmp_path, code_dir, untracked)
    (code_dir / "wip.txt").write_text("the user's work in progress\n")
    head, status = _git(code_dir, "rev-parse", "HEAD"), _git(code_dir, "status", "--porcelain")
    monkeypatch.setenv(TOKEN_VAR, SECRET)
    capsys.readouterr()
    assert main(["reproduce", str(cell), "--into", str(tmp_path / "cli")]) == 2
    assert "pass --worktree; or, on a clean tree: git -C" in capsys.readouterr().err
    _forget(code_dir, monkeypatch)

    dry = reproduce(cell, into=tmp_path / "dry", worktree=True, dry_run=True)
    assert dry.plan.worktree == str(tmp_path / "dry" / ".mushin" / "worktree")
    assert dry.plan.code.same and not (tmp_path / "dry").exists()  # a dry run keeps nothing
    _forget(code_dir, monkeypatch)
    result = reproduce(cell, into=tmp_path / "again", worktree=True)
    assert result.ok, result.diff.verdict()
    where = tmp_path / "again" / ".mushin" / "worktree"
    assert _git(where, "rev-parse", "HEAD") == first
    assert (where / "helper_kept.py").is_file() == untracked
    record = read_json(_dir(result) / PROVENANCE_FILE)
    assert record["run"]["reproduction"]["worktree"] == str(where)
    assert record["reproducibility"]["code"]["git"]["diff_sha256"] == sha
    assert record["run"]["experiment"]["file"].startswith(str(where))
    assert read_json(_dir(result) / "mushin_metrics.json") == read_json(
        cell / "mushin_metrics.json"
    )
    # the user's own tree: not touched
    assert _git(code_dir, "rev-parse", "HEAD") == head
    assert _git(code_dir, "status", "--porcelain") == status
    assert [line.split()[0] for line in _git(code_dir, "worktree", "list").splitlines()] == [
        str(code_dir),
        str(where),
    ]


def test_a_worktree_refused_after_its_checkout_is_removed_and_nothing_is_left(
    tmp_path: Path, code_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cell, _, _ = _a_dirty_run_then_a_commit(tmp_path, code_dir)
    monkeypatch.setenv(TOKEN_VAR, SECRET)
    _forget(code_dir, monkeypatch)
    with pytest.raises(ReproduceError, match="nodes"):
        reproduce(cell, into=tmp_path / "again", worktree=True, nodes=0)
    assert not (tmp_path / "again").exists()
    assert len(_git(code_dir, "worktree", "list").splitlines()) == 1

    (tmp_path / "sweep" / ".mushin" / "code").joinpath(
        read_json(cell / PROVENANCE_FILE)["reproducibility"]["code"]["git"]["diff_sha256"]
        + ".patch"
    ).unlink()
    with pytest.raises(ReproduceError, match="the sweep keeps no copy of that code"):
        reproduce(cell, into=tmp_path / "again", worktree=True)
    assert not (tmp_path / "again").exists()


def test_a_clean_cells_commit_reruns_from_a_worktree(
    tmp_path: Path, code_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def change(module: Any) -> None:
        path = Path(module.__file__)
        path.write_text(path.read_text() + "\n# changed\n")
        _git(code_dir, "add", ".")

    cell, first, second = _a_commit_after_the_run(tmp_path, code_dir, change)
    monkeypatch.setenv(TOKEN_VAR, SECRET)
    with pytest.raises(ReproduceError, match="leaving this tree as it is, pass worktree=True"):
        reproduce(cell, into=tmp_path / "again")
    _forget(code_dir, monkeypatch)
    result = reproduce(cell, into=tmp_path / "again", worktree=True)
    assert result.ok, result.diff.verdict()
    assert _git(tmp_path / "again" / ".mushin" / "worktree", "rev-parse", "HEAD") == first
    assert _git(code_dir, "rev-parse", "HEAD") == second


def test_a_git_step_that_fails_says_what_failed_and_what_to_do(tmp_path: Path) -> None:
    from mushin_box._reproduce.trust import _git

    with pytest.raises(ReproduceError) as failed:
        _git(["worktree", "add", "--detach", str(tmp_path / "w"), "HEAD"], tmp_path)  # no repo
    said = str(failed.value)
    assert said.startswith(f"git worktree in {tmp_path} failed: fatal: not a git repository")
    assert "drop worktree=True and check the cell's code out yourself" in said
