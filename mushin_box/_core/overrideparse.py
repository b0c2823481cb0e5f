# SPDX-License-Identifier: MIT
"""Hydra's parse of override texts, each text parsed once per process.

Hydra's ANTLR parser is a large share of a resume (docs/performance.md), and ``Workflow.run``
parses each text several times: every module parses here, and shares the result unchanged.

Examples
--------
>>> [o.key_or_group for o in parse_overrides(["lr=0.1,0.2", "+x=1"])]
['lr', 'x']
>>> parse_overrides(["lr=0.1"])[0] is parse_overrides(["lr=0.1"])[0]
True
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any


@functools.lru_cache(maxsize=256)
def _parse_one(text: str) -> Any:
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    try:
        return OverridesParser.create().parse_overrides([text])[0]
    except OverrideParseException as exc:  # Hydra's text names no override and has 2 lines
        said = "; ".join(line.strip() for line in exc.message.splitlines() if line.strip())
        raise OverrideParseException(text, f"bad override {text!r}: {said}") from None


def parse_overrides(overrides: Sequence[str]) -> list[Any]:
    """Hydra's parse of each override, cached by text; read the objects only. A bad one is
    Hydra's ``OverrideParseException``, whose one-line message names it.

    >>> parse_overrides(["lr=0.1", "x=["])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    hydra.errors.OverrideParseException: bad override 'x=[': no viable alternative at input ...
    """
    return [_parse_one(text) for text in overrides]


def is_hydra_key(key: str) -> bool:
    """Is ``key`` (an override's key or group, without ``+``/``~``) Hydra's own? ``hydra``
    and what is under it; a task's key may start with the same letters.

    >>> is_hydra_key("hydra.launcher.qos"), is_hydra_key("hydra/sweeper"), is_hydra_key("hydration")
    (True, True, False)
    """
    return key == "hydra" or key.startswith(("hydra.", "hydra/"))


def override_keys(overrides: Sequence[str]) -> list[str]:
    """The keys (or groups) the overrides set, in their order, Hydra's own left out."""
    keys = [o.key_or_group for o in parse_overrides(overrides)]
    return [key for key in keys if not is_hydra_key(key)]
