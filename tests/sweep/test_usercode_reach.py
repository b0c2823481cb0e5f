# SPDX-License-Identifier: MIT
"""Which user modules the code fingerprint reaches, in the layouts users have: packages
without ``__init__.py``, a config holding a list of targets, a script's optional imports
(issue 19: the fingerprint group's mutants of the import walk)."""

from __future__ import annotations

import importlib
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hydra_zen import builds, make_config

from mushin_box._sweep.usercode import code_identity, user_modules


class Src:
    """Folders of user code on ``sys.path``; each test's module names are its own."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.tag = uuid.uuid4().hex[:8]
        self.dirs: list[Path] = []

    def add(self, files: dict[str, str], where: str = "src") -> Path:
        """Write ``files`` (``{tag}`` in a path or text is this test's tag) under
        ``root/where``, which goes on ``sys.path`` (last)."""
        base = self.root / where
        for rel, text in files.items():
            path = base / rel.format(tag=self.tag)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text).replace("{tag}", self.tag))
        if base not in self.dirs:
            self.dirs.append(base)
            sys.path.append(str(base))
        importlib.invalidate_caches()
        return base

    def edit(self, rel: str, text: str, where: str = "src") -> None:
        (self.root / where / rel.format(tag=self.tag)).write_text(text)


@pytest.fixture
def src(tmp_path: Path) -> Iterator[Src]:
    made = Src(tmp_path)
    yield made
    for base in made.dirs:
        sys.path.remove(str(base))
    for name in [m for m in sys.modules if made.tag in m]:
        del sys.modules[name]


def test_packages_without_init_are_followed_imported_or_not(src: Src) -> None:
    """A project without ``__init__.py`` files (namespace packages), and one such folder
    inside a regular package that is not imported yet: the modules in them count."""
    src.add(
        {
            # the task's package has no __init__.py; its models folder neither, and the task
            # imports it only when it runs
            "exp_{tag}/train.py": """
                from . import util

                def task():
                    from exp_{tag}.models.net import Net
                    from reg_{tag}.models.head import Head
            """,
            "exp_{tag}/util.py": "U = 1\n",
            "exp_{tag}/models/net.py": "class Net:\n    pass\n",
            # a regular package (nobody imported it yet) with a folder without __init__.py
            "reg_{tag}/__init__.py": "",
            "reg_{tag}/models/head.py": "class Head:\n    pass\n",
        }
    )
    train = importlib.import_module(f"exp_{src.tag}.train")
    assert f"reg_{src.tag}" not in sys.modules and f"exp_{src.tag}.models" not in sys.modules
    found = user_modules([train.task])
    tag = src.tag
    # a namespace package has no file of its own: only its modules count
    assert set(found) == {
        f"exp_{tag}.train",
        f"exp_{tag}.util",
        f"exp_{tag}.models.net",
        f"reg_{tag}",
        f"reg_{tag}.models.head",
    }
    before = code_identity(train.task)
    src.edit("exp_{tag}/models/net.py", "class Net:\n    k = 2\n")
    assert code_identity(train.task).fingerprint != before.fingerprint
    assert f"reg_{tag}" not in sys.modules  # found without importing


def test_a_package_split_over_two_folders_is_followed_into_both(src: Src) -> None:
    """The pre-PEP 420 split package (``pkgutil.extend_path`` in each ``__init__.py``): a
    module in the second folder counts, as its package's ``__path__`` says."""
    init = "__path__ = __import__('pkgutil').extend_path(__path__, __name__)\n"
    src.add({"split_{tag}/__init__.py": init, "split_{tag}/a.py": "from . import b\n"})
    src.add({"split_{tag}/__init__.py": init, "split_{tag}/b.py": "B = 1\n"}, where="more")
    a = importlib.import_module(f"split_{src.tag}.a")
    del sys.modules[f"split_{src.tag}.b"]  # as if `a` imported it only when it runs
    found = user_modules([], {"_target_": f"{a.__name__}.X"})
    second = src.root / "more" / f"split_{src.tag}" / "b.py"
    assert found[f"split_{src.tag}.b"] == second.resolve()


def test_a_config_with_a_list_of_targets_covers_each_target(src: Src) -> None:
    """Callbacks, loggers...: a list of targets in the config, next to an interpolation that
    only Hydra resolves: each target's module counts, and an edit of any re-runs."""
    src.add(
        {
            "cbs_{tag}/__init__.py": "",
            "cbs_{tag}/early.py": "class Early:\n    pass\n",
            "cbs_{tag}/ckpt.py": "class Ckpt:\n    pass\n",
        }
    )
    early = importlib.import_module(f"cbs_{src.tag}.early")
    ckpt = importlib.import_module(f"cbs_{src.tag}.ckpt")
    config = make_config(
        callbacks=[builds(early.Early), builds(ckpt.Ckpt)],
        out="${hydra:runtime.output_dir}",  # resolvable inside a Hydra job only
    )
    found = user_modules([], config)
    assert set(found) == {f"cbs_{src.tag}", early.__name__, ckpt.__name__}
    before = code_identity(len, config=config)
    src.edit("cbs_{tag}/ckpt.py", "class Ckpt:\n    every = 2\n")
    after = code_identity(len, config=config)
    assert after.fingerprint != before.fingerprint
    assert {m for m in after.modules if after.modules[m] != before.modules[m]} == {ckpt.__name__}


def test_a_target_deep_in_packages_roots_its_own_module(src: Src) -> None:
    """``pkg.sub.mod.Thing``, the packages' ``__init__.py`` empty: the module that defines
    the target counts, not only a package above it."""
    src.add(
        {
            "deep_{tag}/__init__.py": "",
            "deep_{tag}/sub/__init__.py": "",
            "deep_{tag}/sub/mod.py": "class Thing:\n    pass\n",
        }
    )
    mod = importlib.import_module(f"deep_{src.tag}.sub.mod")
    found = user_modules([], {"model": {"_target_": f"{mod.__name__}.Thing"}})
    assert mod.__name__ in found


def test_a_dotted_value_that_names_no_imported_module_is_not_code(src: Src) -> None:
    """``data: results.csv`` names a data file, not the module ``results.py`` beside the
    code that nobody imported: the config's strings root only imported modules."""
    src.add({"results_{tag}.py": "X = 1\n"})
    assert user_modules([], {"data": f"results_{src.tag}.csv"}) == {}


def test_a_scripts_imports_that_may_fail_are_followed_past(src: Src) -> None:
    """A script written to run both as a package module and on its own (``from .x`` that
    falls back to ``from x``), an optional dependency that is not installed, a builtin
    module, a module imported only when the task runs: the user modules all count, and only
    under their real names."""
    src.add(
        {
            "train_{tag}.py": """
                import sys

                try:
                    from .helpers_{tag} import SCALE  # run as part of a package
                except ImportError:
                    from helpers_{tag} import SCALE  # run as a script

                try:
                    import not_installed_{tag}.extras
                except ImportError:
                    pass

                def task():
                    import later_{tag}
                    return SCALE * later_{tag}.K * len(sys.argv)
            """,
            "helpers_{tag}.py": "SCALE = 2\n",
            "later_{tag}.py": "K = 3\n",
        }
    )
    train = importlib.import_module(f"train_{src.tag}")
    assert f"later_{src.tag}" not in sys.modules
    found = user_modules([train.task])
    assert set(found) == {f"train_{src.tag}", f"helpers_{src.tag}", f"later_{src.tag}"}


def test_a_yaml_config_target_not_imported_yet_counts(src: Src) -> None:
    """A config written as YAML (no ``builds()`` imported its class): the module its
    ``_target_`` names is found on ``sys.path`` without importing it, and editing it (or
    what it imports) changes the fingerprint."""
    from omegaconf import OmegaConf

    src.add(
        {
            "yml_{tag}/__init__.py": "",
            "yml_{tag}/models.py": "from yml_{tag} import layers\n\nclass Net:\n    pass\n",
            "yml_{tag}/layers.py": "WIDTH = 8\n",
        }
    )
    config = OmegaConf.create({"model": {"_target_": f"yml_{src.tag}.models.Net", "w": 1}})
    found = user_modules([], config)
    assert f"yml_{src.tag}" not in sys.modules  # found, not imported
    assert {f"yml_{src.tag}.models", f"yml_{src.tag}.layers", f"yml_{src.tag}"} <= set(found)
    before = code_identity(lambda: None, config=config)
    src.edit("yml_{tag}/layers.py", "WIDTH = 16\n")
    assert code_identity(lambda: None, config=config) != before
