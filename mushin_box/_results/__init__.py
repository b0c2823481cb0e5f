# SPDX-License-Identifier: MIT
"""What a sweep produced, read and shown: it runs, submits and changes nothing.

- :mod:`.experiment`: ``load_experiment``: a sweep (or one job) as an xarray Dataset;
- :mod:`.series`: the pieces that Dataset is built from: one job's metrics and series;
- :mod:`.stagefile`: one ``MetricsCallback`` file as plain lists (no numpy: ``show`` reads it);
- :mod:`.finished`: a finished sweep read from its manifest and one metrics file per cell;
- :mod:`.raw_sweep`: ``load_experiment`` of a plain Hydra ``--multirun`` sweep;
- :mod:`.table`: a sweep's results as a table: which cells, in what order, which is best;
- :mod:`.seriesmetric`: a metric named on the command line (``val_loss@min``) per cell;
- :mod:`.report`: ``mushin-box report``: a sweep as one self-contained HTML page;
- :mod:`.provsummary`: a provenance record in a few words (the report, ``show``'s code line);
- :mod:`.htmlpage` and :mod:`.svgplot`: the HTML and the inline SVG curves of such pages;
- :mod:`.curves` and :mod:`.heatmap`: the report's pictures (every series, a 2-parameter grid);
- :mod:`.manycells`: what a report shows of thousands of cells (the best N, a band, a CSV);
- :mod:`.diff`: two cells or two sweeps compared, provenance and metrics, from disk;
- :mod:`.diffview`: a diff as rows a person reads (terminal, Markdown, HTML);
- :mod:`.divergence`: where two runs' fit fingerprints first part (initial weights, data
  order, an epoch's weights).

Must not import torch (banned in ``scripts/check-imports``; the one exception is the
``.pt`` metrics of jobs written before ``fit_metrics.json``), run a task, or write into a
sweep.
"""
