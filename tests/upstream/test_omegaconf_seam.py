# SPDX-License-Identifier: MIT
"""OmegaConf's private names the kit relies on (``mushin_box._upstream.omegaconf``), one test
each. A failure names the OmegaConf name whose behaviour changed: fix the seam, not its
callers."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING, DictConfig, ListConfig, OmegaConf
from omegaconf.nodes import AnyNode, IntegerNode

from mushin_box._core.overrideparse import parse_overrides
from mushin_box._upstream.hydra import apply_overrides
from mushin_box._upstream.omegaconf import child_node, is_unsettled, node_value


class Color(enum.Enum):
    red = 1
    blue = 2


@dataclass
class _Sub:
    width: int = 4


@dataclass
class _Config:
    n: int = 1
    color: Color = Color.red
    sub: _Sub = field(default_factory=_Sub)
    maybe: _Sub | None = None
    required: _Sub = MISSING
    link: Any = "${n}"
    items: list[int] = field(default_factory=lambda: [1, 2])
    subdir: str = "${mushin_cell:}"


def test_omegaconf_Container_get_node_returns_a_keys_node_unresolved() -> None:
    cfg = OmegaConf.structured(_Config)
    assert isinstance(child_node(cfg, "n"), IntegerNode)  # the typed field's own node
    assert isinstance(child_node(cfg, "link"), AnyNode)  # not resolved to n's value
    assert isinstance(child_node(cfg, "sub"), DictConfig)
    assert child_node(cfg, "sub") is cfg.sub  # the node itself, not a copy
    assert isinstance(child_node(cfg, "items"), ListConfig)
    assert node_value(child_node(child_node(cfg, "items"), 1)) == 2
    # a resolver no one registered: reading the node must not call it
    assert node_value(child_node(cfg, "subdir")) == "${mushin_cell:}"


def test_omegaconf_ValueNode_value_is_a_leafs_raw_content() -> None:
    cfg = OmegaConf.structured(_Config)
    assert node_value(child_node(cfg, "link")) == "${n}"
    apply_overrides(parse_overrides(["n=7", "color=blue"]), cfg)
    n, color = node_value(child_node(cfg, "n")), node_value(child_node(cfg, "color"))
    assert (n, type(n)) == (7, int)
    assert color is Color.blue  # the member, as to_container(enum_to_str=True) names it


def test_omegaconf_Node_is_none_is_missing_is_interpolation_tell_an_unsettled_node() -> None:
    cfg = OmegaConf.structured(_Config)
    unsettled = [
        k for k in ("n", "sub", "maybe", "required", "link") if is_unsettled(child_node(cfg, k))
    ]
    assert unsettled == ["maybe", "required", "link"]
