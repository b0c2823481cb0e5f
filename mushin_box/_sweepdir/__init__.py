# SPDX-License-Identifier: MIT
"""The sweep directory as any process on any login node reads it, with no daemon.

- :mod:`.manifest`: the sweep root: its manifest (a cache rebuilt from the cell sidecars),
  its lock, and the cells' status records;
- :mod:`.liveness`: the owner a ``running`` cell names (host, pid, start time, SLURM job),
  and whether it is still alive;
- :mod:`.board`: every cell's state, owner, timing, metrics and error, as readers show it;
  :mod:`.gridorder` puts the cells in the grid's order, :mod:`.jobmatch` finds the job of a
  submission that runs a waiting cell;
- :mod:`.settled`: a finished sweep as its manifest tells it, each cell's files opened
  only where the manifest cannot answer (``status``, ``show``, ``load_experiment``);
- :mod:`.cellindex`: the completed cells' records and metrics with their files' identities,
  so that a resume of a finished sweep opens each file without reading it;
- :mod:`.progress`: the progress bar over the cells, fed by their sidecars;
- :mod:`.logs`: every rank's output of a cell, found from the cell alone;
- :mod:`.cancel`: stop cells (``scancel``, or signals to local owners): the one writer here.

Must not import hydra, omegaconf, numpy, xarray, submitit or torch (``scripts/check-imports``
bans them): ``status``, ``ls``, ``logs``, ``wait`` and ``cancel`` load this room, from any
shell, many times a day. Runs nothing a sidecar names before it is checked.
"""
