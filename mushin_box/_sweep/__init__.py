# SPDX-License-Identifier: MIT
"""The engine: ``Workflow``, its cells, and the decision to reuse, skip or run each.

- :mod:`.workflow`: ``Workflow``: a task swept over a grid, one directory per cell;
- :mod:`.handle`: ``SweepHandle``, for a sweep whose jobs run without its driver;
- :mod:`.sweeprun`: one ``Workflow.run`` under the sweep's lock;
- :mod:`.cells`: one cell = one Hydra job: the picklable ``CellRunner`` and ``CellPlan``
  (their paths stay here: jobs already in a queue unpickle them);
- :mod:`.decide`: reuse, skip or run, as a pure decision;
- :mod:`.prefilter` and :mod:`.jobconfig`: a resume that decides finished cells before
  Hydra launches, and each job's config without composing it;
- :mod:`.compose`: the first job composed as Hydra will, before anything is written;
- :mod:`.validate`: the sweep's keys, checked against the task and its config;
- :mod:`.usercode`: the code fingerprint: the user code the cells run, by content;
- :mod:`.cellfiles`: what a cell writes beside its task: metrics, provenance, its failure
  record, and Hydra's files.

Must not know command-line flags or launch profiles (that is :mod:`mushin_box._launch`).
"""
