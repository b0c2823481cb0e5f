# SPDX-License-Identifier: MIT
"""OmegaConf's private names, each behind one function: the only module that reaches
``omegaconf._utils`` or a leading-underscore method of an OmegaConf node.

What the kit takes from each, and why OmegaConf's public API does not do it:

* :func:`child_node` (``Container._get_node``) and :func:`node_value`
  (``ValueNode._value()``): a key's node as it is written, neither resolved nor converted.
  The kit needs the node's class (a typed field validates what a sweep sets over it) and
  its raw value (an interpolation's text, a leaf as ``to_container`` reads it).
  ``cfg[key]`` and ``OmegaConf.select`` resolve interpolations and return values, not
  nodes; no public call returns a node.
* :func:`is_unsettled` (``Node._is_none``, ``_is_missing``, ``_is_interpolation``): a node
  whose content only a compose settles, asked of the node itself. The public
  ``OmegaConf.is_missing`` needs the node's parent and key, and no public call asks
  whether a node is None.

Each has a test of the behaviour relied on in ``tests/upstream/test_omegaconf_seam.py``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["child_node", "is_unsettled", "node_value"]


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
