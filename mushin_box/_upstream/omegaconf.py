# SPDX-License-Identifier: MIT
"""OmegaConf's private names, each behind one function.

* :func:`child_node`, :func:`node_value`: a key's node as written (its class: a typed field
  validates what a sweep sets) and its raw value; ``cfg[key]`` and ``OmegaConf.select``
  resolve and return values, and no public call returns a node.
* :func:`is_unsettled`, asked of the node itself: ``OmegaConf.is_missing`` needs its parent
  and key, and no public call asks whether a node is None.

Tests: ``tests/upstream/test_omegaconf_seam.py``.
"""

from __future__ import annotations

from typing import Any


def child_node(container: Any, key: Any) -> Any:
    """The node at ``key`` of a ``DictConfig`` or ``ListConfig``, unresolved (an
    interpolation, ``None`` or ``???`` stays the node that holds it); None when absent."""
    return container._get_node(key)


def node_value(node: Any) -> Any:
    """A value node's raw content: an interpolation's text, unresolved; an enum field's
    member; a typed field's converted value."""
    return node._value()


def is_unsettled(node: Any) -> bool:
    """Is the node's content known only once Hydra composes (None, ``???``, ``${...}``)?"""
    return bool(node._is_none() or node._is_missing() or node._is_interpolation())
