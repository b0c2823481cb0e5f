# SPDX-License-Identifier: MIT
"""The engine: ``Workflow``, its cells, and the decision to reuse, skip or run each.

:mod:`.workflow` (``Workflow``, the driver) runs one sweep under its lock; :mod:`.handle`
is ``SweepHandle``, for jobs that run without the driver. Each cell is one Hydra job of
:mod:`.cells` (the picklable ``CellRunner`` and ``CellPlan``: their paths stay, since queued
jobs unpickle them), which writes :mod:`.cellfiles` and asks :mod:`.decide`. A resume
decides finished cells before Hydra launches (:mod:`.prefilter`, with each job's config by
:mod:`.jobconfig`). Before anything is written, :mod:`.compose` composes the first job and
:mod:`.validate` checks the sweep's keys; :mod:`.usercode` is the code fingerprint.

Must not know command-line flags or launch profiles (that is :mod:`mushin_box._launch`).
"""
