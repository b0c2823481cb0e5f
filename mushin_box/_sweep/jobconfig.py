# SPDX-License-Identifier: MIT
"""A sweep job's config without composing it: the first job's, with the job's swept values.

Hydra composes every job from scratch (its basic sweeper twice). A grid whose swept keys are
plain config values (:class:`SweptValues` refuses the rest) has the same defaults tree in
every job, so a job's config is the first job's with the swept values set over it by
Hydra's own function (same validation, same errors). :class:`JobConfigs` is trusted for a
batch only once its last job, composed in full by Hydra, came out identical; the resume
shortcut uses :class:`SweptValues` and :class:`PlainFingerprints`.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, OverrideType, ValueType
from omegaconf import DictConfig, OmegaConf, open_dict, read_write
from omegaconf.nodes import ValueNode

from mushin_box._core.overrideparse import is_hydra_key
from mushin_box._core.redact import redact
from mushin_box._sweep.cells import cell_key, redacted_fingerprint
from mushin_box._upstream.hydra import apply_overrides, overrides_dirname
from mushin_box._upstream.omegaconf import child_node, node_value

#: an interpolation whose value is the environment's, never another key's
_ENV_ONLY = re.compile(r"\$\{oc\.env:[^${}]*\}")


def cell_of(cfg: Any) -> tuple[Path, Any]:
    """The job's directory (as ``run_job`` resolves it) and its task config (no ``hydra``)."""
    HydraConfig.instance().set_config(cfg)  # the ${mushin_cell:} resolver reads it
    directory = Path(str(OmegaConf.select(cfg, "hydra.sweep.dir"))) / str(
        OmegaConf.select(cfg, "hydra.sweep.subdir")
    )
    task_cfg = copy.deepcopy(cfg)
    with read_write(task_cfg), open_dict(task_cfg):
        del task_cfg["hydra"]
    return Path(os.path.abspath(directory)), task_cfg


def _set_over(text: str) -> str:
    """``+key=v`` as ``++key=v`` (the key exists already), any other override as it is."""
    return "+" + text if text.startswith("+") and not text.startswith("++") else text


def strings(node: Any) -> Iterator[str]:
    """Every string in a plain config, keys included.

    >>> list(strings({"a": ["x", 1, {"b": "y"}]}))
    ['a', 'x', 'b', 'y']
    """
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(key, str):
                yield key
            yield from strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from strings(value)
    elif isinstance(node, str):
        yield node


def element_overrides(parsed: Sequence[Any]) -> dict[str, Any]:
    """Each job override the basic sweeper writes for a sweep's values, mapped to Hydra's
    parse of it, built from the sweep's parse (``parsed``) instead of parsing each again;
    ``+key=v`` also as ``++key=v``, as :class:`SweptValues` sets it over.

    >>> from mushin_box._core.overrideparse import parse_overrides
    >>> table = element_overrides(parse_overrides(["lr=0.1,1e-05", "+n='a b',null", "x=1"]))
    >>> sorted(table)
    ["++n='a b'", '++n=null', "+n='a b'", '+n=null', 'lr=0.1', 'lr=1e-05']
    >>> table["lr=1e-05"].value(), table["++n='a b'"].value(), table["+n=null"].is_add()
    (1e-05, 'a b', True)
    """
    out: dict[str, Any] = {}
    for sweep in parsed:
        if not (sweep.is_sweep_override() and sweep.is_discrete_sweep()):
            continue
        try:
            values = list(sweep.sweep_iterator())
        except Exception:  # a glob over a group: each job is parsed
            continue
        key = sweep.get_key_element()
        for value in values:
            one = Override(sweep.type, sweep.key_or_group, ValueType.ELEMENT, value, sweep.package)
            text = f"{key}={one.get_value_element_as_str()}"
            out[text] = dataclasses.replace(one, input_line=text)
            if sweep.is_add():
                forced = OverrideType.FORCE_ADD
                out["+" + text] = dataclasses.replace(one, type=forced, input_line="+" + text)
    return out


class SweptValues:
    """A job's directory and task config from the first job's config (composed with
    ``return_hydra_config``) and the job's swept values; ``ValueError`` when the grid is not
    one of plain values: no group, ``hydra.*`` key, delete, mapping value or nested key."""

    def __init__(
        self, first: Any, jobs: Sequence[Sequence[str]], known: Mapping[str, Any] | None = None
    ) -> None:
        self._parser = OverridesParser.create()
        self._parsed: dict[str, Any] = dict(known or {})
        width = len(jobs[0])
        if any(len(job) != width for job in jobs):
            raise ValueError("the jobs do not have the same overrides")
        self.first_job = tuple(jobs[0])
        self.swept = [i for i in range(width) if len({job[i] for job in jobs}) > 1]
        self.keys = keys = [self.parse(text).key_or_group for text in jobs[0]]
        if any(
            self.parse(text).key_or_group != key
            for job in jobs
            for text, key in zip(job, keys, strict=True)
        ):
            raise ValueError("the jobs do not set the same keys in the same order")
        choices = set(first.hydra.runtime.choices)
        for i in self.swept:
            key = keys[i]
            for other in keys[:i] + keys[i + 1 :]:
                if other.startswith(key + ".") or key.startswith(other + "."):
                    raise ValueError(f"{key} is nested in {other}")
            if key.replace(".", "/") in choices or is_hydra_key(key):
                raise ValueError(f"{key} is a config group or Hydra's")
            for text in {job[i] for job in jobs}:
                parsed = self.parse(text)
                if parsed.is_delete() or parsed.package is not None:
                    raise ValueError(text)
                if isinstance(parsed.value(), dict):
                    raise ValueError(text)
        _, self.base = cell_of(first)
        for i in self.swept:
            if isinstance(OmegaConf.select(self.base, keys[i], throw_on_missing=False), DictConfig):
                raise ValueError(f"{keys[i]} holds a mapping")
        if node_value(child_node(first.hydra.sweep, "subdir")) != "${mushin_cell:}":
            raise ValueError("hydra.sweep.subdir is not mushin-box's")
        naming = first.hydra.job.config.override_dirname
        self._naming = (list(naming.exclude_keys), str(naming.item_sep), str(naming.kv_sep))
        self._sweep_dir = Path(str(first.hydra.sweep.dir))

    def parse(self, text: str) -> Any:
        """Hydra's parse of one override (cached: a grid repeats its values)."""
        if text not in self._parsed:
            self._parsed[text] = self._parser.parse_override(text)
        return self._parsed[text]

    def set_values(self, job: Sequence[str], cfg: Any) -> None:
        """Set ``job``'s swept values over ``cfg`` (the first job's config, or its task part);
        a '+key=v' added the key in the first job already: it is set over ('++')."""
        apply_overrides([self.parse(_set_over(job[i])) for i in self.swept], cfg)

    def dirname(self, job: Sequence[str]) -> str:
        """Hydra's ``override_dirname`` of ``job``."""
        app = [o for o in map(self.parse, job) if not o.is_hydra_override()]
        return overrides_dirname(app, *self._naming)

    def directory(self, job: Sequence[str]) -> Path:
        """``job``'s directory, as ``run_job`` resolves it."""
        return Path(os.path.abspath(os.path.join(self._sweep_dir, cell_key(self.dirname(job)))))

    def cell(self, job: Sequence[str]) -> tuple[Path, Any]:
        """``job``'s directory and task config."""
        task_cfg = copy.deepcopy(self.base)
        self.set_values(job, task_cfg)
        return self.directory(job), task_cfg


def _node(cfg: Any, key: str) -> Any:
    """The node at a dotted key whose parents are all mappings; ``ValueError`` if not."""
    parent_key, _, last = key.rpartition(".")
    parent = OmegaConf.select(cfg, parent_key) if parent_key else cfg
    if not isinstance(parent, DictConfig) or last not in parent:
        raise ValueError(f"{key} is not a key of a mapping")
    return child_node(parent, last)


class PlainFingerprints:
    """Each job's config fingerprint (:func:`~mushin_box._sweep.cells.config_fingerprint` of
    the config :meth:`SweptValues.cell` builds) without building that config: the first
    job's task config as plain data, with the job's swept values set in it. That holds only
    when no other key can depend on a swept value: anything else is refused (``ValueError``).
    Each distinct value is converted once by Hydra's function over a scratch copy."""

    def __init__(self, values: SweptValues, jobs: Sequence[Sequence[str]]) -> None:
        base = values.base
        raw = OmegaConf.to_container(base, resolve=False, enum_to_str=True)
        if any("${" in _ENV_ONLY.sub("", text) for text in strings(raw)):
            raise ValueError("the config holds an interpolation")
        plain: Any = OmegaConf.to_container(base, resolve=True, enum_to_str=True)
        self._redacted: dict[str, Any] = redact(plain)
        self._leaves: dict[tuple[int, str], Any] = {}
        self._swept = values.swept
        self._paths = [tuple(values.keys[i].split(".")) for i in values.swept]
        for path in self._paths:
            node: Any = plain
            for part in path[:-1]:
                node = node.get(part) if isinstance(node, dict) else None
            if not isinstance(node, dict) or path[-1] not in node:
                raise ValueError(f"{'.'.join(path)} is not a key of mappings only")
        scratch = copy.deepcopy(base)
        self._values: dict[tuple[int, str], Any] = {}
        for i in values.swept:
            key = values.keys[i]
            kind = type(_node(base, key))
            if not issubclass(kind, ValueNode):
                raise ValueError(f"{key} is not a leaf")
            for text in dict.fromkeys(job[i] for job in jobs):
                parsed = values.parse(_set_over(text))
                if isinstance(parsed.value(), list | dict) or "${" in str(parsed.value()):
                    raise ValueError(text)
                apply_overrides([parsed], scratch)
                node = _node(scratch, key)
                if type(node) is not kind:
                    raise ValueError(f"{text} changes the node of {key}")
                value = node_value(node)
                self._values[(i, text)] = value.name if isinstance(value, Enum) else value

    def _redacted_leaf(self, i: int, path: tuple[str, ...], text: str) -> Any:
        """The value of ``text`` at ``path`` as ``redact`` leaves it in the whole config (its
        path and value alone decide), or :data:`_HIDDEN` under a secret key."""
        if (i, text) in self._leaves:
            return self._leaves[(i, text)]
        node: Any = self._redacted
        for part in path[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            return _HIDDEN
        alone: Any = self._values[(i, text)]
        for part in reversed(path):
            alone = {part: alone}
        redacted = redact(alone)
        for part in path:
            redacted = redacted[part]
        self._leaves[(i, text)] = redacted
        return redacted

    def fingerprint(self, job: Sequence[str]) -> str | None:
        """``job``'s config fingerprint (None: only the config itself can tell), from the
        first job's redacted config and each swept value redacted alone at its path."""
        top: dict[str, Any] = dict(self._redacted)
        copied: dict[tuple[str, ...], dict[str, Any]] = {(): top}
        for i, path in zip(self._swept, self._paths, strict=True):
            leaf = self._redacted_leaf(i, path, job[i])
            if leaf is _HIDDEN:
                continue
            node: dict[str, Any] = top
            for depth in range(1, len(path)):
                prefix = path[:depth]
                if prefix not in copied:
                    copied[prefix] = node[path[depth - 1]] = dict(node[path[depth - 1]])
                node = copied[prefix]
            node[path[-1]] = leaf
        return redacted_fingerprint(top)


#: a swept value a secret key above it hides (see ``PlainFingerprints._redacted_leaf``)
_HIDDEN = object()


def _copy(cfg: Any) -> Any:
    """A copy of a job's config, ``hydra`` writable as ``load_sweep_config`` returns it."""
    out = copy.deepcopy(cfg)
    OmegaConf.set_readonly(out.hydra, False)
    return out


class JobConfigs:
    """Every job's full config (``load_sweep_config``'s) in one batch of a launch, from its
    first job's compose; built by :func:`job_configs`, which checks it first. With only
    scalar swept values, one working copy serves every job (``run_job`` copies what it
    keeps); a list or a mapping value, merged into what is there, gets a fresh copy.
    """

    def __init__(
        self, loader: Any, master: Any, first: Any, values: SweptValues, *, scalars: bool = False
    ) -> None:
        self._loader = loader
        self.master = master
        self._first = first
        self.values = values
        self._composed: dict[tuple[str, ...], Any] = {values.first_job: first}
        self._scalars = scalars
        self._work: Any = None  # the working copy, when ``scalars``

    def _quick(self, job: Sequence[str]) -> Any:
        if not self._scalars:
            cfg = _copy(self._first)
        elif self._work is None:
            cfg = self._work = _copy(self._first)
        else:
            cfg = self._work
            OmegaConf.set_readonly(cfg.hydra, False)  # the last job's run_job set it
        self.values.set_values(job, cfg)
        hydra = cfg.hydra
        task = [o.input_line for o in map(self.values.parse, job) if not o.is_hydra_override()]
        hydra.overrides.task = task
        hydra.job.override_dirname = self.values.dirname(job)
        hydra.runtime.cwd = os.getcwd()
        with open_dict(hydra):
            for key in hydra.job.env_copy:
                hydra.job.env_set[key] = os.environ[key]
        OmegaConf.copy_cache(from_config=self.master, to_config=cfg)
        return cfg

    def load(self, job: Sequence[str]) -> Any:
        """``job``'s config, as ``loader.load_sweep_config(master, job)`` composes it."""
        composed = self._composed.get(tuple(job))
        if composed is not None:
            return _copy(composed)
        first, swept = self.values.first_job, self.values.swept
        if len(job) != len(first) or any(
            a != b for i, (a, b) in enumerate(zip(job, first, strict=True)) if i not in swept
        ):  # it differs from the first job outside the swept positions
            return self._loader.load_sweep_config(self.master, list(job))
        return self._quick(job)

    def agrees(self, job: Sequence[str]) -> bool:
        """Does Hydra's full compose of ``job`` give the same config? (kept for ``load``)"""
        full = self._loader.load_sweep_config(self.master, list(job))
        self._composed[tuple(job)] = full
        return OmegaConf.to_yaml(self._quick(job)) == OmegaConf.to_yaml(full)


def job_configs(loader: Any, master: Any, batch: Sequence[Sequence[str]]) -> JobConfigs | None:
    """Check that every job of ``batch`` composes (a bad value: Hydra's own error) and return
    its :class:`JobConfigs`; None when the grid needs Hydra's full check and compose."""
    if len(batch) < 2:
        return None
    first = loader.load_sweep_config(master, list(batch[0]))  # Hydra's error, as Hydra's check
    try:
        values = SweptValues(first, batch)
    except Exception:  # not a grid of plain values: Hydra checks and composes each job
        return None
    for job in batch[1:]:
        values.cell(job)  # a bad value: Hydra's error, before any job runs
    scalars = all(
        not isinstance(values.parse(_set_over(job[i])).value(), list | dict)
        for job in batch
        for i in values.swept
    )
    configs = JobConfigs(loader, master, first, values, scalars=scalars)
    return configs if configs.agrees(batch[-1]) else None
