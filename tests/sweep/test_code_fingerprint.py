# SPDX-License-Identifier: MIT
"""The code fingerprint covers the user code a cell runs, and nothing unrelated."""

from __future__ import annotations

import importlib
import json
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hydra_zen import builds, make_config

from mushin_box import Workflow, multirun
from mushin_box._core.layout import STATUS_FILE
from mushin_box._sweep.usercode import code_identity, user_modules

FILES = {
    "__init__.py": "",
    "helpers.py": "SCALE = 10\n",
    # the task imports the helper at module level, and another module lazily
    "tasks.py": textwrap.dedent(
        """
        from . import helpers

        def task(x: int, model=None):
            from .lazy import OFFSET
            return {"y": x * helpers.SCALE + OFFSET, "k": model.k if model else 0}
        """
    ),
    "lazy.py": "OFFSET = 0\n",
    # named only by the config's _target_: the task's module never imports it
    "models.py": textwrap.dedent(
        """
        FACTOR = 1

        class Net:
            def __init__(self, k: int = 1):
                self.k = k * FACTOR
        """
    ),
    "unrelated.py": "NOT_USED = 1\n",
}


class Project:
    """A user package on sys.path, edited between runs as a user would."""

    def __init__(self, root: Path) -> None:
        self.name = f"fpproj_{uuid.uuid4().hex[:8]}"
        self.dir = root / self.name
        self.dir.mkdir(parents=True)
        for name, text in FILES.items():
            (self.dir / name).write_text(text)
        sys.path.insert(0, str(root))
        self.tasks = importlib.import_module(f"{self.name}.tasks")
        self.models = importlib.import_module(f"{self.name}.models")
        self.config = make_config(x=1, model=builds(self.models.Net, k=1))

    def edit(self, module: str, old: str, new: str) -> None:
        path = self.dir / f"{module}.py"
        path.write_text(path.read_text().replace(old, new))
        if f"{self.name}.{module}" in sys.modules:  # what a fresh interpreter would run
            importlib.reload(sys.modules[f"{self.name}.{module}"])

    def run(self, root: Path, **kwargs: Any) -> Any:
        return Workflow(self.tasks.task, self.config).run(
            working_dir=root, progress=False, x=multirun([1, 2]), **kwargs
        )


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    proj = Project(tmp_path / "src")
    yield proj
    sys.path.remove(str(tmp_path / "src"))
    for name in [m for m in sys.modules if m.startswith(proj.name)]:
        del sys.modules[name]


def test_editing_a_helper_constant_runs_the_cells_again(project: Project, tmp_path: Path) -> None:
    root = tmp_path / "sweep"
    assert project.run(root)["y"].values.tolist() == [10, 20]
    project.edit("helpers", "SCALE = 10", "SCALE = 1000")
    with pytest.warns(UserWarning, match=r"x=1: code fingerprint changed \(code: .*helpers\)"):
        ds = project.run(root, resume=True)
    assert ds["y"].values.tolist() == [1000, 2000]  # was reused as [10, 20]


def test_a_lazy_import_and_a_config_target_count(project: Project, tmp_path: Path) -> None:
    root = tmp_path / "sweep"
    project.run(root)
    project.edit("lazy", "OFFSET = 0", "OFFSET = 5")
    with pytest.warns(UserWarning, match=r"code: .*lazy\)"):
        assert project.run(root, resume=True)["y"].values.tolist() == [15, 25]
    project.edit("models", "FACTOR = 1", "FACTOR = 7")
    with pytest.warns(UserWarning, match=r"code: .*models\)"):
        assert project.run(root, resume=True)["k"].values.tolist() == [7, 7]


def test_editing_an_unrelated_file_reuses_every_cell(project: Project, tmp_path: Path) -> None:
    root = tmp_path / "sweep"
    project.run(root)
    before = {p.parent.name: p.read_text() for p in root.glob(f"*/{STATUS_FILE}")}
    project.edit("unrelated", "NOT_USED = 1", "NOT_USED = 2")
    (project.dir / "notes.md").write_text("an edit nobody imports")
    project.run(root, resume=True)
    after = {p.parent.name: p.read_text() for p in root.glob(f"*/{STATUS_FILE}")}
    assert after == before  # reused: nothing ran, nothing was rewritten


def test_reuse_stale_code_reuses_and_says_so_in_the_status(
    project: Project, tmp_path: Path
) -> None:
    root = tmp_path / "sweep"
    project.run(root)
    project.edit("helpers", "SCALE = 10", "SCALE = 1000")
    with pytest.raises(ValueError, match="pass resume=True"):
        project.run(root, reuse_stale_code=True)
    with pytest.warns(UserWarning, match=r"x=1: code fingerprint changed.*reusing it anyway"):
        ds = project.run(root, resume=True, reuse_stale_code=True)
    assert ds["y"].values.tolist() == [10, 20]
    status = json.loads((root / "x=1" / STATUS_FILE).read_text())
    assert status["reused_despite"] == ["code"] and status["status"] == "completed"
    with pytest.warns(UserWarning, match="code fingerprint changed"):  # not blessed for good
        assert project.run(root, resume=True)["y"].values.tolist() == [1000, 2000]


def test_only_user_code_is_covered(project: Project) -> None:
    found = user_modules([project.tasks.task], project.config)
    name = project.name
    assert set(found) == {name, *(f"{name}.{m}" for m in ("tasks", "helpers", "lazy", "models"))}
    # the standard library, installed packages and mushin-box itself are not user code
    assert user_modules([json.dumps, builds, Workflow]) == {}
    identity = code_identity(project.tasks.task, config=project.config)
    assert set(identity.modules) == set(found) and len(identity.fingerprint) == 64


def test_decide_names_changed_modules_and_ignores_only_code_on_request() -> None:
    from mushin_box._sweep.decide import decide

    old = {"config": "c1", "code": "k1"}
    done = {"status": "completed", "fingerprints": old, "run_id": "r0", "attempt": 1}
    done["code_modules"] = {"pkg.helpers": "aa", "pkg.tasks": "bb"}
    now = {"config": "c1", "code": "k2"}
    modules = {"pkg.helpers": "cc", "pkg.tasks": "bb"}
    rerun = decide(done, now, cell="x=1", run_id="r1", resume=True, code_modules=modules)
    assert rerun.action == "run" and not rerun.continue_from_checkpoint
    assert "code fingerprint changed (code: pkg.helpers) since it completed" in rerun.warnings[0]
    kept = decide(done, now, cell="x=1", run_id="r1", resume=True, reuse_stale_code=True)
    assert kept.action == "reuse" and kept.reused_despite == ("code",)
    config_too = decide(
        done,
        {"config": "c2", "code": "k2"},
        cell="x=1",
        run_id="r1",
        resume=True,
        reuse_stale_code=True,
    )
    assert config_too.action == "run"  # only the code is ignored
    failed = {**done, "status": "failed"}
    cont = decide(failed, now, cell="x=1", run_id="r1", resume=True, reuse_stale_code=True)
    assert cont.action == "run" and cont.continue_from_checkpoint


def test_a_scripts_task_is_named_as_its_module(tmp_path: Path) -> None:
    """`python train.py` runs train's task as __main__.task; importing train.py names it
    train.task. Both are one task, so both have one fingerprint (reproduce imports it)."""
    import importlib.util

    script = tmp_path / f"train_{uuid.uuid4().hex[:8]}.py"
    script.write_text("def task(x):\n    return {'y': x}\n")

    def load(name: str) -> Any:
        spec = importlib.util.spec_from_file_location(name, script)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module

    as_main = load("__mp_main__")  # what multiprocessing calls a script's main module
    try:
        as_module = load(script.stem)
        assert code_identity(as_main.task).fingerprint == code_identity(as_module.task).fingerprint
    finally:
        sys.modules.pop("__mp_main__", None)
        sys.modules.pop(script.stem, None)
