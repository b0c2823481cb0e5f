# SPDX-License-Identifier: MIT
"""Hydra's own files of a job (``.hydra/config.yaml``, ``hydra.yaml``, ``overrides.yaml``),
written atomically, and a failure to write them recorded by the cell.

Hydra writes these three files with a plain ``open(..., "w")`` before it calls the task
function, and again on every run of the job (a resumed cell that is reused included). A
full disk or a kill between the truncation and the write leaves them empty, and HydraDDP's
other ranks, ``reproduce`` and the user all read them. :func:`install` replaces Hydra's
writer (a three-line private function, replaced through
:func:`mushin_box._upstream.hydra.replace_save_config`) with one that
writes through :func:`mushin_box._core.sidecars.write_text_atomic`: the old file stays
whole until the new one is complete, and a file that already holds the same text is left
alone. The bytes written are Hydra's own (``OmegaConf.to_yaml``'s text, by libyaml's
emitter where that is the same: :func:`to_yaml`). A cell's files are
made durable with the cell runner's first commit (:mod:`mushin_box._core.durable`).

Design note: for a job of a ``Workflow`` sweep (Hydra job name ``mushin_workflow``), a
failure to write them (``OSError``: no space, quota) is not raised inside Hydra, where
no one records it: it is kept, and the cell runner, which Hydra calls next, takes it
(:func:`take_failure`) and records the cell as ``failed`` with that error, as for any
other failure. Any other Hydra job gets the error raised, as Hydra would.
"""

from __future__ import annotations

import contextlib
import functools
import re
from pathlib import Path
from typing import Any

from mushin_box._core import durable
from mushin_box._core.sidecars import write_text_atomic

__all__ = ["JOB_NAME", "install", "take_failure", "to_yaml"]

#: the Hydra job name of every Workflow launch (``hydra_zen.launch(job_name=...)``)
JOB_NAME = "mushin_workflow"

_FAILED: dict[str, OSError] = {}


def _is_workflow_job() -> bool:
    from hydra.core.hydra_config import HydraConfig

    try:
        return str(HydraConfig.get().job.name) == JOB_NAME
    except Exception:  # no Hydra job set up: not ours
        return False


#: what libyaml's emitter is trusted with: text of printable ASCII and line breaks, which it
#: writes byte for byte as PyYAML's does (tests/sweep/test_hydrafiles_yaml.py checks it)
_PLAIN_TEXT = re.compile(r"[\x20-\x7e\n]*\Z")


def _plain(node: Any) -> bool:
    if isinstance(node, str):
        return _PLAIN_TEXT.match(node) is not None
    if isinstance(node, dict):
        return all(_plain(k) and _plain(v) for k, v in node.items())
    if isinstance(node, list):
        return all(_plain(v) for v in node)
    return node is None or isinstance(node, bool | int | float)


@functools.cache
def _c_dumper() -> Any:
    """OmegaConf's YAML dumper on libyaml's emitter (None without libyaml)."""
    import yaml

    from mushin_box._upstream.omegaconf import yaml_dumper

    if not getattr(yaml, "__with_libyaml__", False):
        return None
    python = yaml_dumper()
    return type(
        "OmegaConfCDumper",
        (yaml.CDumper,),
        {
            "yaml_representers": dict(python.yaml_representers),
            "yaml_multi_representers": dict(python.yaml_multi_representers),
        },
    )


def to_yaml(cfg: Any) -> str:
    """``OmegaConf.to_yaml(cfg)``, the same text, written by libyaml's emitter when the
    config holds only plain text (~1.3 ms instead of ~3.5 ms for a ``hydra.yaml``: three
    files a cell); anything else goes through OmegaConf's own."""
    import yaml
    from omegaconf import OmegaConf

    from mushin_box._upstream.omegaconf import yaml_dumper

    # OmegaConf.to_yaml's own steps, the container made once for either emitter
    container = OmegaConf.to_container(cfg, resolve=False, enum_to_str=True)
    dumper = _c_dumper() if _plain(container) else None
    return yaml.dump(
        container,
        default_flow_style=False,
        allow_unicode=True,
        sort_keys=False,
        Dumper=dumper or yaml_dumper(),
    )


def save_config(cfg: Any, filename: str, output_dir: Path) -> None:
    """Hydra's writer of a job's ``.hydra`` files, atomic (see the module doc)."""
    path = Path(output_dir) / filename
    text = to_yaml(cfg)
    try:
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            return  # a reused cell's files: nothing to rewrite
    except (OSError, UnicodeDecodeError):
        pass
    ours = _is_workflow_job()
    try:
        # a cell's files are synced with the cell runner's next commit (_core/durable.py)
        with durable.handed_on() if ours else contextlib.nullcontext():
            write_text_atomic(path, text)  # creates output_dir, as Hydra's mkdir did
    except OSError as exc:
        if not ours:
            raise
        _FAILED.setdefault(str(Path(output_dir).parent), exc)  # the first one counts


def take_failure(cell_dir: Path) -> OSError | None:
    """The error that kept Hydra from writing this cell's files in this process, if any."""
    return _FAILED.pop(str(cell_dir), None)


def install() -> bool:
    """Make :func:`save_config` Hydra's writer; False (and nothing replaced) when Hydra's
    writer is not the one this was written for."""
    from mushin_box._upstream.hydra import replace_save_config

    return replace_save_config(save_config)
