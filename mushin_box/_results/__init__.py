# SPDX-License-Identifier: MIT
"""What a sweep produced, read and shown: it runs, submits and changes nothing.

- :mod:`.experiment`: ``load_experiment``: a sweep, a Hydra ``--multirun`` sweep or a job;
- :mod:`.series`: ``MetricsCallback`` series as lists, ``val_loss@min`` per cell (no numpy);
- :mod:`.table`: the results table (which cells, in what order, which is best);
- :mod:`.report`: ``mushin-box report``: table, curves, heatmap and provenance summary;
- :mod:`.markup`: HTML, Markdown tables and inline SVG plots of the pages;
- :mod:`.diff`: two cells or sweeps compared, the rows a person reads, where fits part.

Must not import torch (banned in ``scripts/check-imports``, but for the ``.pt`` metrics of
jobs older than ``fit_metrics.json``), run a task, or write into a sweep.
"""
