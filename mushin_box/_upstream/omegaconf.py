# SPDX-License-Identifier: MIT
"""OmegaConf's private names, each behind one function.

No public call returns a node (:func:`child_node`, :func:`node_value`: its class validates
what a sweep sets), nor asks a node itself whether it is settled (:func:`is_unsettled`).

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
