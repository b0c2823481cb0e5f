# SPDX-License-Identifier: MIT
"""The code fingerprint covers the user code a cell runs, and nothing unrelated."""

from __future__ import annotations

import enum
import importlib
import json
import os
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


def test_config_fingerprint_follows_the_values_but_not_the_secrets() -> None:
    """A new value is a new experiment; a new token is not; an interpolation that only
    resolves later is hashed as written (issue 19: the fingerprint group's mutants)."""
    from omegaconf import OmegaConf

    from mushin_box._sweep.cells import config_fingerprint

    def fp(**values: Any) -> str:
        return config_fingerprint(OmegaConf.create(values))

    base = fp(lr=0.1, db={"password": "a"}, ref="${lr}")
    assert len(base) == 64 and base == fp(lr=0.1, db={"password": "a"}, ref="${lr}")
    assert base != fp(lr=0.2, db={"password": "a"}, ref="${lr}")
    assert base == fp(lr=0.1, db={"password": "other"}, ref="${lr}")  # redacted first
    # resolved: an interpolation hashes as its value
    assert fp(a=1, b="${a}") == fp(a=1, b=1)
    # unresolvable now (a key that does not exist yet): hashed unresolved, as written
    later = fp(a="${missing}")
    assert later == fp(a="${missing}") and later != fp(a="${other}")
    # an enum hashes as its name, resolved or not (not as YAML of the object)
    assert fp(c=_Color.RED) == fp(c="RED")
    assert fp(a="${missing}", c=_Color.RED) == fp(a="${missing}", c="RED")
    # what canonical JSON cannot hold (bytes) is hashed as the config's YAML
    assert fp(b=b"\x00") != fp(b=b"\x01") and len(fp(b=b"\x00")) == 64


class _Color(enum.Enum):
    RED = 1


def test_code_identity_follows_each_reached_module_and_only_those(project: Project) -> None:
    """The sweeps above, without a sweep: each module a root reaches changes the fingerprint
    and is named; an unrelated one does not (fast enough for the mutation run)."""
    name = project.name

    def identity() -> Any:
        return code_identity(project.tasks.task, config=project.config)

    before = identity()
    assert identity() == before  # stable
    # the cells' code fingerprint is this one (Workflow.run's, without a pre_call)
    assert code_identity(project.tasks.task, config=project.config, extra=(None,)) == before
    for module, old, new in [
        ("helpers", "SCALE = 10", "SCALE = 1000"),  # imported at module level
        ("lazy", "OFFSET = 0", "OFFSET = 5"),  # imported inside the task
        ("models", "FACTOR = 1", "FACTOR = 7"),  # named by the config's _target_ only
    ]:
        project.edit(module, old, new)
        after = identity()
        assert after.fingerprint != before.fingerprint, module
        changed = {m for m in after.modules if after.modules[m] != before.modules.get(m)}
        assert changed == {f"{name}.{module}"}
        assert len(after.modules[f"{name}.{module}"]) == 16
        before = after
    project.edit("unrelated", "NOT_USED = 1", "NOT_USED = 2")
    assert identity() == before
    # the config is a root: without it, the model's module is not reached
    assert f"{name}.models" not in code_identity(project.tasks.task).modules


def test_the_task_and_the_roots_it_is_reached_from(project: Project, tmp_path: Path) -> None:
    """Which task runs counts (two tasks of one module differ); a partial is its function; a
    config target in a subpackage roots its own module; import cycles end (issue 19)."""
    import functools

    name = project.name
    (project.dir / "two.py").write_text("def a(x):\n    return x\n\ndef b(x):\n    return x\n")
    sub = project.dir / "sub"
    sub.mkdir()
    (sub / "__init__.py").write_text("from . import deep\n")
    (sub / "deep.py").write_text("from .. import sub\n\nclass Thing:\n    pass\n")
    two = importlib.import_module(f"{name}.two")
    importlib.import_module(f"{name}.sub.deep")

    a = code_identity(two.a)
    assert a.fingerprint != code_identity(two.b).fingerprint  # same files, another task
    assert code_identity(functools.partial(two.a, x=1)) == a
    assert user_modules([None, two.a]) == user_modules([two.a])
    found = user_modules([], {"_target_": f"{name}.sub.deep.Thing"})
    assert set(found) == {name, f"{name}.sub", f"{name}.sub.deep"}  # the cycle ended


def test_files_under_site_packages_are_not_user_code_and_hashes_are_per_file(
    tmp_path: Path,
) -> None:
    from mushin_box._sweep.usercode import _sha256, is_user_file

    for where in ("site-packages", "dist-packages"):
        assert not is_user_file(tmp_path / "venv" / where / "pkg" / "m.py")
    assert is_user_file(tmp_path / "proj" / "m.py")
    # two files of the same size and time: each its own hash (the cache is per path)
    one, two = tmp_path / "one.py", tmp_path / "two.py"
    one.write_text("X = 1\n")
    two.write_text("X = 2\n")
    for path in (one, two):
        os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    assert _sha256(one) != _sha256(two)


def test_imports_are_followed_in_files_never_imported(project: Project) -> None:
    """Relative imports at any level, from a package's ``__init__`` too, absolute ones, lazy
    ones, in modules nobody imported yet; a file that does not parse is hashed all the
    same (issue 19: the mutants of the import walk)."""
    name = project.name
    files = {
        "entry.py": "def run():\n    from .pkg import a\n    from .pkg.sub import m\n",
        "pkg/__init__.py": "from .only_init import Y\n",
        "pkg/only_init.py": "Y = 1\n",
        "pkg/a.py": f"from . import c\nimport {name}.z\n",
        "pkg/c.py": "def broken(:\n",
        "z.py": "Q = 1\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/m.py": "from ..x import Y\n",
        "pkg/x.py": "Y = 1\n",
    }
    for rel, text in files.items():
        (project.dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (project.dir / rel).write_text(text)
    entry = importlib.import_module(f"{name}.entry")  # imports nothing else
    assert f"{name}.pkg" not in sys.modules
    found = user_modules([entry.run])
    expected = ["", ".entry", ".pkg", ".pkg.only_init", ".pkg.a", ".pkg.c", ".z"]
    expected += [".pkg.sub", ".pkg.sub.m", ".pkg.x"]
    assert set(found) == {name + m for m in expected}
    assert f"{name}.pkg" not in sys.modules  # found without importing
