# SPDX-License-Identifier: MIT
"""What a sweep produced, read and shown: it runs, submits and changes nothing.

- :mod:`.experiment`: ``load_experiment``: a sweep, a plain Hydra ``--multirun`` sweep, or
  one job, as an xarray Dataset;
- :mod:`.series`: one ``MetricsCallback`` file as plain lists, and a metric named on the
  command line (``val_loss@min``) per cell (no numpy: ``show`` reads it);
- :mod:`.table`: a sweep's results as a table (which cells, in what order, which is best),
  a finished sweep read from its manifest;
- :mod:`.report`: ``mushin-box report``: the page, its curves and heatmap, the many-cells
  cut, and the provenance summary;
- :mod:`.markup`: HTML, Markdown tables and inline SVG plots of the pages;
- :mod:`.diff`: two cells or two sweeps compared, the rows a person reads, and where two
  runs' fingerprints first part.

Must not import torch (banned in ``scripts/check-imports``; the one exception is the
``.pt`` metrics of jobs written before ``fit_metrics.json``), run a task, or write into a
sweep.
"""
