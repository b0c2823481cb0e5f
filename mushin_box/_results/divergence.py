# SPDX-License-Identifier: MIT
"""Where two runs first parted, from their fits' fingerprints (``fit_fingerprints.json``).

Rank 0's ``MetricsCallback`` records the weights at the fit's start and each epoch's end,
and each epoch's first batch (:mod:`mushin_box._train.divergence`). Two runs of the same
experiment whose results differ are walked in the order a fit runs, and the first point
where they part is named, with its most likely cause:

1. the initial weights: the module was built before the seed was set (a task that seeds in
   its body: hydra-zen builds the module first);
2. an epoch's first batch (compared only at equal world sizes: a rank's batch depends on
   it): the data order;
3. an epoch's weights: by less than one part in a million of their norm, floating-point
   reduction order (another world size, another kernel); else a real difference.

Examples
--------
>>> w = {"sha256": "a", "norm": 2.0}
>>> one = {"world_size": 1, "fit_start": w, "epochs": [{"epoch": 0, "weights": w}]}
>>> drift = {**one, "epochs": [{"epoch": 0, "weights": {"sha256": "b", "norm": 2.000000002}}]}
>>> first_divergence(one, drift)
'weights part at epoch 0, by 1e-09 of their norm (floating-point reduction order)'
>>> first_divergence(one, {**one, "fit_start": {"sha256": "c", "norm": 3.0}})[:22]
'initial weights differ'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["DRIFT", "first_divergence"]

#: weights whose norms agree to this relative difference part by float drift, not a bug
DRIFT = 1e-6


def _epochs(record: Mapping[str, Any]) -> dict[int, Mapping[str, Any]]:
    rows = record.get("epochs")
    out: dict[int, Mapping[str, Any]] = {}
    for row in rows if isinstance(rows, list) else []:
        if isinstance(row, Mapping) and isinstance(row.get("epoch"), int):
            out[int(row["epoch"])] = row
    return out


def _sha(value: Any) -> str | None:
    return value.get("sha256") if isinstance(value, Mapping) else None


def _norm(weights: Mapping[str, Any]) -> float | None:
    value = weights.get("norm")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def first_divergence(a: Any, b: Any) -> str | None:
    """The first point where two fits' fingerprints part, in words; None when they do
    not (or either side recorded none)."""
    if not isinstance(a, Mapping) or not isinstance(b, Mapping):
        return None
    start_a, start_b = _sha(a.get("fit_start")), _sha(b.get("fit_start"))
    if start_a and start_b and start_a != start_b:
        return (
            "initial weights differ: the module is built before seeding. Seed in pre_call "
            "(docs/reproducibility.md)"
        )
    ea, eb = _epochs(a), _epochs(b)
    for epoch in sorted(ea.keys() & eb.keys()):
        x, y = ea[epoch], eb[epoch]
        # each epoch's own world when recorded (a fit resumed at another world size)
        same_world = x.get("world_size", a.get("world_size")) == y.get(
            "world_size", b.get("world_size")
        )
        batch_a, batch_b = x.get("first_batch"), y.get("first_batch")
        if same_world and batch_a and batch_b and batch_a != batch_b:
            return f"data order differs at epoch {epoch}"
        wa, wb = x.get("weights"), y.get("weights")
        if isinstance(wa, Mapping) and isinstance(wb, Mapping) and _sha(wa) != _sha(wb):
            na, nb = _norm(wa), _norm(wb)
            if na is None or nb is None:
                return f"weights differ at epoch {epoch}"
            gap = abs(na - nb) / max(abs(na), abs(nb), 1e-300)
            if gap < DRIFT:
                return (
                    f"weights part at epoch {epoch}, by {gap:.1g} of their norm "
                    "(floating-point reduction order)"
                )
            return f"weights differ at epoch {epoch} (norm {na:.6g} vs {nb:.6g})"
    return None
