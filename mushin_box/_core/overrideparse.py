# SPDX-License-Identifier: MIT
"""Hydra's parse of override texts, each text parsed once per process.

Design note: a launch parses its overrides several times: ``Workflow.run``'s refusal check,
the first job, the resume shortcut's grid, the keys' check, and Hydra's sweeper once more.
Hydra's ANTLR parser takes ~0.1 s for a sweep of 1,000 values, a fifth of what the resume
of a finished 1,000-cell sweep takes in all. Each text is parsed here once, by Hydra's own
parser, and the result is shared: its readers must not change it. During a launch,
:func:`hydra_parses_cached` has Hydra's config loader and basic sweeper parse through the
cache too, each override a copy of the cached one (Hydra's parser gives the sweeper's
the config loader, which a ``glob`` over a config group needs: the copy holds it too).

Examples
--------
>>> [o.key_or_group for o in parse_overrides(["lr=0.1,0.2", "+x=1"])]
['lr', 'x']
>>> parse_overrides(["lr=0.1"])[0] is parse_overrides(["lr=0.1"])[0]
True
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["CachedParser", "hydra_parses_cached", "parse_overrides"]


@functools.lru_cache(maxsize=256)
def _parse_one(text: str) -> Any:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create().parse_overrides([text])[0]


def parse_overrides(overrides: Sequence[str]) -> list[Any]:
    """Hydra's parse of each override (``OverridesParser.parse_overrides``, its error for a
    bad one), cached by text; read the objects only."""
    return [_parse_one(text) for text in overrides]


class CachedParser:
    """Hydra's ``OverridesParser`` as its basic sweeper uses it (``create``,
    ``parse_overrides``), from the cache: each override a copy holding the config loader."""

    def __init__(self, config_loader: Any = None) -> None:
        self.config_loader = config_loader

    @classmethod
    def create(cls, config_loader: Any = None) -> CachedParser:
        return cls(config_loader)

    def parse_overrides(self, overrides: Sequence[str]) -> list[Any]:
        loader = self.config_loader
        return [dataclasses.replace(o, config_loader=loader) for o in parse_overrides(overrides)]


@contextlib.contextmanager
def hydra_parses_cached() -> Iterator[None]:
    """Hydra's config loader and basic sweeper parse overrides through :class:`CachedParser`
    while inside (each module's ``OverridesParser`` name, put back after; a Hydra without
    it parses as it does)."""
    from hydra._internal import config_loader_impl
    from hydra._internal.core_plugins import basic_sweeper

    modules = [m for m in (config_loader_impl, basic_sweeper) if hasattr(m, "OverridesParser")]
    real = [m.OverridesParser for m in modules]
    for module in modules:
        module.OverridesParser = CachedParser  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for module, parser in zip(modules, real, strict=True):
            module.OverridesParser = parser  # type: ignore[attr-defined]
