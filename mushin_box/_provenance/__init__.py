# SPDX-License-Identifier: MIT
"""The provenance record: the ``reproducibility`` part (must match between runs)
and the ``run`` part (may differ), environment facts, rank topology, and record comparison.

Builds the whole record, run.task (where the task is defined: :mod:`.task`) included.
Writes nothing but a cell's provenance files.
"""
