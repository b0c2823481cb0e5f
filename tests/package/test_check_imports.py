# SPDX-License-Identifier: MIT
"""scripts/check-imports on small fake trees: each kind of finding, and a clean tree."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import REPO

SCRIPT = REPO / "scripts" / "check-imports"

ROOMS = (
    "_core",
    "_upstream",
    "_train",
    "_image",
    "_provenance",
    "_container",
    "_slurm",
    "_sweepdir",
    "_results",
    "_sweep",
    "_launch",
    "_reproduce",
    "cli",
)

# a tree that follows the rule, with the tricky-but-allowed cases
CLEAN: dict[str, str] = {
    "mushin_box/__init__.py": '''
        """Public face.

        >>> from mushin_box import thing  # a docstring example is not an import
        """
        from typing import TYPE_CHECKING

        from mushin_box._core.version import __version__  # a dunder is not private

        if TYPE_CHECKING:
            from mushin_box._sweep.workflow import Workflow
        ''',
    "mushin_box/__main__.py": "from mushin_box.cli.main import main\n",
    "mushin_box/testing.py": "from mushin_box._core import version\n",
    "mushin_box/_core/version.py": "__version__ = '0'\n",
    "mushin_box/_core/layout.py": "from . import version\nSTATUS = 'status.json'\n",
    "mushin_box/_train/resume.py": "from mushin_box._core.layout import STATUS\n",
    "mushin_box/_provenance/full.py": "from .._core import layout\n",
    "mushin_box/_container/rankwrap.py": (
        "from mushin_box._provenance import full\nfrom mushin_box._image import spec\n"
    ),
    "mushin_box/_image/spec.py": "import mushin_box._core.layout\n",
    "mushin_box/_slurm/launcher.py": "from mushin_box._container.rankwrap import full\n",
    "mushin_box/_slurm/jobs.py": "from .launcher import full\n",
    "mushin_box/_sweep/workflow.py": """
        def run():
            from mushin_box._slurm import jobs
            from hydra_plugins.hydra_submitit_launcher import config  # third party
            return jobs, config
        """,
    # the one banned import allowed (BAN_EXCEPTIONS): old jobs' .pt metrics
    "mushin_box/_results/series.py": (
        "def old():\n    from mushin_box._train.metrics import load_metrics_file\n"
    ),
    "mushin_box/cli/main.py": "import importlib\n",
    "mushin_box/cli/launch.py": (
        "from mushin_box.cli.main import importlib\n"
        "def run():\n    from mushin_box._sweep.workflow import run\n"
    ),
    "hydra_plugins/mushin_box_launcher/__init__.py": "",
    "hydra_plugins/mushin_box_launcher/mushin_box_launcher.py": (
        "from mushin_box._slurm.launcher import full\nfrom mushin_box._core import version\n"
    ),
}

# each entry: file -> source, and the line the script must print for it
BAD: dict[str, str] = {
    # to the right, module level
    "mushin_box/_slurm/config.py": "import os\nfrom mushin_box._sweepdir.manifest import read\n",
    "mushin_box/_sweepdir/manifest.py": "def read():\n    pass\n",
    # siblings of one rank
    "mushin_box/_train/metrics.py": "import mushin_box._image.spec\n",
    # lazy, inside a method
    "mushin_box/_core/sidecars.py": """
        class Sidecar:
            def write(self):
                from mushin_box._provenance.full import record
                return record
        """,
    # type-only
    "mushin_box/_image/build.py": """
        from typing import TYPE_CHECKING

        if TYPE_CHECKING:
            from mushin_box._container.rankwrap import Launch
        """,
    # relative, two levels up, naming a module
    "mushin_box/_container/launchspec.py": "from .._slurm import config\n",
    # a room importing the public face
    "mushin_box/_container/smoke.py": "from mushin_box import testing_helpers\n",
    # the plugin reaching past _slurm
    "hydra_plugins/mushin_box_launcher/mushin_box_launcher.py": (
        "from mushin_box._sweepdir.manifest import read\n"
    ),
    # a private name from another module of the same room
    "mushin_box/_provenance/record.py": "from mushin_box._provenance.full import _scrub, record\n",
    # a cycle inside one room (each edge allowed on its own)
    "mushin_box/_provenance/full.py": "from mushin_box._provenance import env\nrecord = 1\n",
    "mushin_box/_provenance/env.py": "def f():\n    from . import full\n",
    # a module in no room
    "mushin_box/util.py": "",
    # banned in the room that every status/ls/logs/wait/cancel loads, even lazily
    "mushin_box/_sweepdir/board.py": "def f():\n    import omegaconf.errors\n",
    # torch in the results room, outside the one exception
    "mushin_box/_results/table.py": "from torch import nn\n",
}

EXPECTED = {
    "right": "mushin_box/_slurm/config.py:2: mushin_box._slurm.config imports "
    "mushin_box._sweepdir.manifest (_slurm may import only _core, _upstream, _train, _image, "
    "_provenance, _container)",
    "sibling": "mushin_box/_train/metrics.py:1: mushin_box._train.metrics imports "
    "mushin_box._image.spec (_train may import only _core, _upstream)",
    "lazy": "mushin_box/_core/sidecars.py:3: mushin_box._core.sidecars imports "
    "mushin_box._provenance.full (_core imports no room)",
    "type-only": "mushin_box/_image/build.py:4: mushin_box._image.build imports "
    "mushin_box._container.rankwrap (_image may import only _core, _upstream)",
    "relative": "mushin_box/_container/launchspec.py:1: mushin_box._container.launchspec imports "
    "mushin_box._slurm.config (_container may import only _core, _upstream, _train, _image, "
    "_provenance)",
    "top level": "mushin_box/_container/smoke.py:1: mushin_box._container.smoke imports "
    "mushin_box (_container may import only _core, _upstream, _train, _image, _provenance; "
    "rooms must not import the top level)",
    "plugin": "hydra_plugins/mushin_box_launcher/mushin_box_launcher.py:1: "
    "hydra_plugins.mushin_box_launcher.mushin_box_launcher imports mushin_box._sweepdir.manifest "
    "(the Hydra plugin may import only _core, _upstream, _slurm)",
    "private": "mushin_box/_provenance/record.py:1: mushin_box._provenance.record imports _scrub "
    "from mushin_box._provenance.full (private name imported across modules)",
    "cycle": "mushin_box/_provenance/env.py:2: import cycle: mushin_box._provenance.env -> "
    "mushin_box._provenance.full -> mushin_box._provenance.env (edges at "
    "mushin_box/_provenance/env.py:2, mushin_box/_provenance/full.py:1)",
    "no room": "mushin_box/util.py:1: mushin_box.util is in no room (add it to ROOMS or "
    "PUBLIC_FACE in scripts/check-imports)",
    "banned": "mushin_box/_sweepdir/board.py:2: mushin_box._sweepdir.board imports "
    "omegaconf.errors (_sweepdir must not import omegaconf (BANNED in scripts/check-imports))",
    "banned torch": "mushin_box/_results/table.py:1: mushin_box._results.table imports torch "
    "(_results must not import torch (BANNED in scripts/check-imports))",
}


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for room in ROOMS:
        (root / "mushin_box" / room).mkdir(parents=True, exist_ok=True)
        (root / "mushin_box" / room / "__init__.py").touch()
    for rel, source in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source).lstrip("\n"))
    return root


def check(root: Path, script: Path = SCRIPT) -> subprocess.CompletedProcess[str]:
    # -I -S: the script needs only the standard library, and starts faster without site
    return subprocess.run(
        [sys.executable, "-I", "-S", str(script), "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.fixture(scope="module")
def bad_run(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    root = write_tree(tmp_path_factory.mktemp("bad"), {**CLEAN, **BAD})
    return check(root)


def test_clean_tree_passes(tmp_path: Path) -> None:
    out = check(write_tree(tmp_path, CLEAN))
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 1, out.stdout
    assert lines[0].endswith("imports checked: no import against the rule, no cycle")
    assert lines[0].startswith(f"{len(CLEAN) + len(ROOMS)} modules, ")  # + the rooms' __init__


@pytest.mark.parametrize("kind", list(EXPECTED))
def test_bad_tree_reports(bad_run: subprocess.CompletedProcess[str], kind: str) -> None:
    assert bad_run.returncode == 1
    assert EXPECTED[kind] in bad_run.stdout.splitlines(), bad_run.stdout


def test_bad_tree_reports_nothing_else(bad_run: subprocess.CompletedProcess[str]) -> None:
    # the public (non-underscore) name in the same statement, and the allowed imports of
    # CLEAN, are not reported; the cycle is reported once, not once per starting module
    assert sorted(bad_run.stdout.splitlines()) == sorted(EXPECTED.values())
    assert "11 finding(s) against the rule, 1 cycle(s)" in bad_run.stderr


def test_allowlist_silences_an_edge_and_its_cycle(tmp_path: Path) -> None:
    script = tmp_path / "check-imports"
    text = SCRIPT.read_text()
    opening = "ALLOWED: dict[tuple[str, str], str] = {"
    assert opening in text
    script.write_text(
        text.replace(
            opening,
            opening + "('mushin_box._provenance.env', 'mushin_box._provenance.full'): 'test',",
        )
    )
    files = {
        **CLEAN,
        "mushin_box/_provenance/full.py": BAD["mushin_box/_provenance/full.py"],
        "mushin_box/_provenance/env.py": BAD["mushin_box/_provenance/env.py"],
    }
    out = check(write_tree(tmp_path / "tree", files), script)
    assert out.returncode == 0, out.stdout + out.stderr


def test_unparsable_file_is_reported(tmp_path: Path) -> None:
    out = check(write_tree(tmp_path, {**CLEAN, "mushin_box/_core/broken.py": "def (:\n"}))
    assert out.returncode == 1
    assert out.stdout.startswith("mushin_box/_core/broken.py:1: cannot parse: ")


# a private upstream name where it is allowed: in its seam, or what is not an upstream's
PRIVATE_CLEAN: dict[str, str] = {
    "mushin_box/_upstream/hydra.py": """
        from hydra._internal.config_loader_impl import ConfigLoaderImpl
        from hydra.core.singleton import Singleton

        def node(cfg):
            return cfg._get_node("x"), Singleton._instances, "-m submitit.core._submit"
        """,
    "mushin_box/_sweep/cells.py": '''
        """Runs ``python -u -m submitit.core._submit`` (a docstring explains; it runs nothing)."""
        import argparse
        import os
        import warnings
        from collections import namedtuple

        from mushin_box._upstream.hydra import node

        Pair = namedtuple("Pair", "a b")
        KEY = "hydra.sweeper._target_"  # Hydra's _x_ keys are its public API

        class Formatter(argparse.HelpFormatter):
            def _fill_text(self, text, width, indent):
                return super()._fill_text(text, width, indent)

        class Own:
            _cache = {}

            @classmethod
            def make(cls, p):
                warnings._filters_mutated()
                return cls._cache, p._replace(a=1), Pair._fields, Own._cache, node

            def run(self):
                os._exit(self._code)
        ''',
}

# each private upstream name outside its seam: the file, and the one line printed for it
PRIVATE_BAD: dict[str, tuple[str, str]] = {
    "mushin_box/_sweep/jobconfig.py": (
        "def f():\n    from hydra._internal.config_loader_impl import ConfigLoaderImpl\n",
        "mushin_box/_sweep/jobconfig.py:2: mushin_box._sweep.jobconfig imports "
        "hydra._internal.config_loader_impl (a private name of hydra: reach it through "
        "mushin_box._upstream.hydra)",
    ),
    "mushin_box/_slurm/launcher.py": (
        "from submitit.slurm.slurm import SlurmExecutor, _convert_mem\n",
        "mushin_box/_slurm/launcher.py:1: mushin_box._slurm.launcher imports _convert_mem from "
        "submitit.slurm.slurm (a private name of submitit: reach it through "
        "mushin_box._upstream.submitit)",
    ),
    "mushin_box/_slurm/torchrun.py": (
        'SUBMIT = ["-u", "-m", "submitit.core._submit"]\n',
        "mushin_box/_slurm/torchrun.py:1: mushin_box._slurm.torchrun names submitit.core._submit "
        "(a private name of submitit: reach it through mushin_box._upstream.submitit)",
    ),
    "mushin_box/_sweep/validate.py": (
        "def f(node):\n    return node._get_node('x')\n",
        "mushin_box/_sweep/validate.py:2: mushin_box._sweep.validate uses node._get_node (an "
        "underscore attribute of what may be an upstream's object: move it to its seam in "
        "mushin_box/_upstream/, or add it to PRIVATE_ATTRIBUTES_OK with why)",
    ),
    "mushin_box/_sweep/compose.py": (
        "def f():\n    from hydra.core.singleton import Singleton\n"
        "    return Singleton._instances\n",
        "mushin_box/_sweep/compose.py:3: mushin_box._sweep.compose uses Singleton._instances (a "
        "private name of hydra: reach it through mushin_box._upstream.hydra)",
    ),
    "mushin_box/_train/metrics.py": (
        "def f(trainer):\n    return getattr(trainer, '_results', None)\n",
        "mushin_box/_train/metrics.py:2: mushin_box._train.metrics uses trainer._results (an "
        "underscore attribute of what may be an upstream's object: move it to its seam in "
        "mushin_box/_upstream/, or add it to PRIVATE_ATTRIBUTES_OK with why)",
    ),
    "mushin_box/_train/ddp.py": (
        "from pytorch_lightning.strategies import DDPStrategy\n"
        "class S(DDPStrategy):\n    def _configure_launcher(self):\n"
        "        super()._configure_launcher()\n",
        "mushin_box/_train/ddp.py:4: mushin_box._train.ddp uses super()._configure_launcher (a "
        "private name of pytorch_lightning: reach it through mushin_box._upstream.lightning)",
    ),
    "hydra_plugins/mushin_box_launcher/cells_sweeper.py": (
        "from mushin_box._upstream.hydra import basic_sweeper\n"
        "class C(basic_sweeper()):\n    def f(self):\n        return super()._x()\n",
        "hydra_plugins/mushin_box_launcher/cells_sweeper.py:4: "
        "hydra_plugins.mushin_box_launcher.cells_sweeper uses super()._x (a private name of "
        "hydra: reach it through mushin_box._upstream.hydra)",
    ),
    "mushin_box/_sweepdir/progress.py": (
        "from mushin_box._upstream.omegaconf import child_node\n",
        "mushin_box/_sweepdir/progress.py:1: mushin_box._sweepdir.progress imports "
        "mushin_box._upstream.omegaconf (_sweepdir must not import mushin_box._upstream.omegaconf "
        "(BANNED in scripts/check-imports))",
    ),
    "mushin_box/_results/table.py": (
        "from mushin_box._upstream.lightning import ddp_launcher\n",
        "mushin_box/_results/table.py:1: mushin_box._results.table imports "
        "mushin_box._upstream.lightning (_results must not import mushin_box._upstream.lightning "
        "(BANNED in scripts/check-imports))",
    ),
}


def test_private_upstream_names_pass_in_their_seam_and_where_they_are_not_an_upstreams(
    tmp_path: Path,
) -> None:
    out = check(write_tree(tmp_path, {**CLEAN, **PRIVATE_CLEAN}))
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("path", list(PRIVATE_BAD))
def test_a_private_upstream_name_outside_its_seam_is_refused(tmp_path: Path, path: str) -> None:
    source, line = PRIVATE_BAD[path]
    out = check(write_tree(tmp_path, {**CLEAN, **PRIVATE_CLEAN, path: source}))
    assert out.returncode == 1
    assert out.stdout.splitlines() == [line]
