# SPDX-License-Identifier: MIT
"""Small fingerprints of a fit, so that two runs that differ say where they first parted.

Rank 0 records in ``fit_fingerprints.json`` the weights at the fit's start (after any
restore) and at each epoch's end, and each epoch's first training batch (with the world
size), each as an exact hash and an L2 norm, so float-level drift can be told from a real
difference; ``diff`` and ``reproduce`` walk two records in that order
(:mod:`mushin_box._results.diff`). One pass over the weights per epoch.

Examples
--------
>>> import torch
>>> first = weights_fingerprint(torch.nn.Linear(2, 1).requires_grad_(False))
>>> sorted(first), len(first["sha256"])
(['norm', 'sha256'], 64)
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import torch


def weights_fingerprint(module: torch.nn.Module) -> dict[str, Any]:
    """sha256 of every parameter's name, shape, dtype and bytes, in order, and the L2 norm
    of them all (float64)."""
    digest = hashlib.sha256()
    total = torch.zeros((), dtype=torch.float64)
    with torch.no_grad():
        for name, param in module.named_parameters():
            data = _hash_into(digest, param, f"{name}:")
            # accumulated in float64 without a float64 copy of the weights
            total += torch.linalg.vector_norm(data, dtype=torch.float64) ** 2
    return {"sha256": digest.hexdigest(), "norm": float(total.sqrt())}


def _hash_into(digest: Any, tensor: torch.Tensor, label: str = "") -> torch.Tensor:
    """Hash ``tensor``'s shape, dtype and bytes (its buffer itself: no bytes copy)."""
    data = tensor.detach().to("cpu").contiguous()
    digest.update(f"{label}{tuple(data.shape)}:{data.dtype}\n".encode())
    digest.update(data.reshape(-1).view(torch.uint8).numpy().data)
    return data


def _tensors(batch: Any) -> list[torch.Tensor]:
    if isinstance(batch, torch.Tensor):
        return [batch]
    if isinstance(batch, Mapping):
        return [t for key in sorted(batch, key=str) for t in _tensors(batch[key])]
    if isinstance(batch, Sequence) and not isinstance(batch, str | bytes):
        return [t for item in batch for t in _tensors(item)]
    return []


def batch_fingerprint(batch: Any) -> str:
    """sha256 of a batch's tensors (shape, dtype and bytes, in order)."""
    digest = hashlib.sha256()
    for tensor in _tensors(batch):
        _hash_into(digest, tensor)
    return digest.hexdigest()
