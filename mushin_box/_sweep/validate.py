# SPDX-License-Identifier: MIT
"""The keys of a sweep, checked against the task and its config before anything runs.

A key added with ``+`` that names nothing the task reads would sweep a bogus grid dimension,
so every key of ``Workflow.run(**sweep_params)`` must be a config field, a config group or a
name the task accepts (any, for ``**kwargs`` or ``zen_cfg``), and a nested key a field of
its node or a parameter of its ``_target_``. In raw ``overrides`` a plain ``key=`` must name
one of those too; ``+key=``, ``++key=``, ``~key`` and ``hydra.*`` are not checked.

Examples
--------
>>> from hydra_zen import make_config
>>> def task(lr: float, seed: int = 0): ...
>>> keys = SweepKeys(task, make_config(lr=0.1))
>>> keys.needs_add("lr"), keys.needs_add("seed")  # seed: a task parameter, not in the config
(False, True)
>>> keys.needs_add("lrate")
Traceback (most recent call last):
...
mushin_box.UnknownKeyError: 'lrate' is neither ...; did you mean 'lr'? ...
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from mushin_box._core.errors import MushinBoxError
from mushin_box._core.overrideparse import is_hydra_key, parse_overrides
from mushin_box._core.overrides import check_sweep_values, parse_sweep_values
from mushin_box._core.targets import public
from mushin_box._train.resume import RESUME_PARAM
from mushin_box._upstream.omegaconf import child_node, is_unsettled


@public
class UnknownKeyError(MushinBoxError, ValueError):
    """A key that names nothing the task or its config accepts. ``reason`` says so, with the
    closest name; ``hint`` ("" for none) is the fix in ``Workflow.run``'s terms."""

    def __init__(self, reason: str, hint: str = "") -> None:
        super().__init__(reason + hint)
        self.reason = reason
        self.hint = hint


def is_config_group(key: str) -> bool:
    """Is ``key`` a Hydra config group (its override value an option name, no value)?"""
    from hydra.core.config_store import ConfigStore

    node: Any = ConfigStore.instance().repo
    for part in key.replace(".", "/").split("/"):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return isinstance(node, dict)


def _accepted_names(fn: Any) -> tuple[set[str], bool] | None:
    """The keyword names ``fn`` accepts, and whether it accepts any; None: unreadable."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    names: set[str] = set()
    any_name = False
    for name, p in signature.parameters.items():
        if p.kind is p.VAR_KEYWORD or name == "zen_cfg":  # zen passes it the whole config
            any_name = True
        elif p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and name != RESUME_PARAM:
            names.add(name)
    return names, any_name


def _suggest(name: str, valid: set[str]) -> str:
    """``"; did you mean 'x'? (valid names: ...)"`` or ``" (valid names: ...)"``."""
    listed = ", ".join(sorted(valid)) if valid else "none"
    close = (
        difflib.get_close_matches(name, sorted(valid), n=1)
        or sorted(
            (v for v in valid if len(v) > 1 and (name.startswith(v) or v.startswith(name))),
            key=len,
        )[-1:]
    )  # lrate: lr (too short for difflib), or learning: learning_rate
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{hint} (valid names: {listed})"


class SweepKeys:
    """The names a task and its config accept (see module doc); a config OmegaConf can't
    read is not checked."""

    def __init__(self, task: Callable[..., Any], config: Any) -> None:
        from omegaconf import DictConfig, ListConfig, OmegaConf

        self._cfg: DictConfig | None
        try:
            cfg = OmegaConf.structured(config)
            self._cfg = cfg if isinstance(cfg, DictConfig) else None
        except Exception:  # exotic configs: no name checking (Hydra still composes them)
            self._cfg = None
        keys = {str(k) for k in self._cfg.keys()} if self._cfg is not None else set()
        defaults = child_node(self._cfg, "defaults") if self._cfg and "defaults" in keys else None
        self._defaults = defaults if isinstance(defaults, ListConfig) else None
        self.fields = keys - {"defaults"}  # Hydra's defaults list is no field of the task
        accepted = _accepted_names(task)
        self.params, self.any_name = accepted if accepted is not None else (set(), True)

    def needs_add(self, key: str) -> bool:
        """Check a ``Workflow.run`` keyword (:class:`UnknownKeyError`); return whether Hydra
        needs ``+`` for it."""
        if self._cfg is None or is_hydra_key(key):
            return False
        root = key.split(".")[0].split("/")[0]
        if key == root and is_config_group(key):
            # an option of a group, also for a field (model=None): '+' unless the
            # defaults list chooses one already (Hydra: "No match in the defaults list")
            return not self._in_defaults(key)
        if root in self.fields:
            return "." in key and self._check_nested(key)
        if is_config_group(key) or is_config_group(root):
            return not self._in_defaults(root)  # e.g. model=multirun(["small", "big"])
        if root in self.params or self.any_name:
            return True  # a parameter the config leaves out: Hydra adds it
        valid = self.fields | self.params
        raise UnknownKeyError(
            f"{key!r} is neither a field of the task's config nor a parameter of the task"
            + _suggest(root, valid)
            + (
                ""
                if valid
                else "; a task that takes no parameters can't be swept: add the parameter "
                "(or **kwargs) to the task"
            ),
            f"; if pre_call reads it, add it to the config, or pass overrides=['+{key}=...'] "
            "to add it on purpose",
        )

    def check_raw(self, overrides: Sequence[str]) -> None:
        """Refuse a raw override Hydra can't parse (its error names it), or
        a plain one (no ``+``/``++``/``~``) whose key names nothing."""
        parsed = parse_overrides(overrides)  # a bad one: Hydra's error, naming it
        if self._cfg is None:
            return
        for text, o in zip(overrides, parsed, strict=True):
            key = o.key_or_group
            if o.is_add() or o.is_force_add() or o.is_delete() or is_hydra_key(key):
                continue
            root = key.split(".")[0].split("/")[0]
            known = root in self.fields or root in self.params or self.any_name
            if known or is_config_group(key) or is_config_group(root):
                continue  # Hydra checks the rest (and asks for '+' where it is needed)
            raise UnknownKeyError(
                f"override {text!r}: {root!r} is neither a field of the task's config nor "
                "a parameter of the task" + _suggest(root, self.fields | self.params),
                f"; to add a new key on purpose, write '+{text.lstrip('+')}'",
            )

    def _in_defaults(self, group: str) -> bool:
        """Does the config's defaults list choose an option of ``group`` already?"""
        return self._defaults is not None and any(
            (str(name).split() or [""])[-1].lstrip("+").split("@")[0] == group
            for entry in self._defaults
            if hasattr(entry, "keys")  # not "_self_" or a config path: no choice to override
            for name in entry.keys()
        )

    def _check_nested(self, key: str) -> bool:
        """Check a dotted key under a config field; return whether it needs ``+``."""
        from omegaconf import DictConfig

        parts = key.split(".")
        node: Any = self._cfg
        for depth, part in enumerate(parts):
            if not isinstance(node, DictConfig):
                return True  # a list or a value: Hydra says what is wrong with it
            if is_unsettled(node):
                return True  # e.g. a group's node, filled when Hydra composes
            if part not in node.keys():
                self._check_new_key(node, key, ".".join(parts[:depth]), part)
                return True
            node = child_node(node, part)
        return False

    def _check_new_key(self, node: Any, key: str, path: str, name: str) -> None:
        """A key new to ``node``: its ``_target_`` must accept it; a structured node
        without one has no room for it; a plain mapping takes any key."""
        if name.startswith("_") and name.endswith("_"):
            return  # Hydra's own (_partial_, _convert_, ...)
        known = {str(k) for k in node.keys() if not str(k).startswith("_")}
        target = node.get("_zen_target") or node.get("_target_")
        if isinstance(target, str):
            try:
                from hydra.utils import get_object

                accepted = _accepted_names(get_object(target))
            except Exception:  # not importable in the driver: the cell will say
                return
            if accepted is None or accepted[1] or name in accepted[0]:
                return
            raise UnknownKeyError(
                f"{key!r}: {name!r} is not a parameter of {path}'s target {target}"
                + _suggest(name, accepted[0] | known)
            )
        from omegaconf import OmegaConf

        if OmegaConf.get_type(node) in (None, dict):
            return  # a free-form mapping
        raise UnknownKeyError(f"{key!r}: {path} has no field {name!r}" + _suggest(name, known))


def user_sweeps(overrides: Sequence[str]) -> dict[str, list[Any]]:
    """Sweeps written by hand in raw overrides are grid axes too, their values distinct as
    ``multirun([...])``'s (``"s=x,'x'"`` would run twice into one cell).

    >>> user_sweeps(["lr=0.1,0.2", "+s=range(2)", "hydra/launcher=basic", "n=3"])
    {'lr': [0.1, 0.2], 's': [0, 1]}
    >>> user_sweeps(["a=1.0,1.00"])
    Traceback (most recent call last):
    ...
    ValueError: duplicate values in the sweep over 'a': 1.0 (2x); ... (override 'a=1.0,1.00')
    """
    out: dict[str, list[Any]] = {}
    for text, o in zip(overrides, parse_overrides(list(overrides)), strict=True):
        if o.is_sweep_override() and not is_hydra_key(o.key_or_group):
            values = parse_sweep_values(text.split("=", 1)[1])
            try:
                check_sweep_values(o.key_or_group, values)
            except ValueError as exc:
                raise ValueError(f"{exc} (override {text!r})") from None
            out[o.key_or_group] = values
    return out
