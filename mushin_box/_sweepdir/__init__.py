# SPDX-License-Identifier: MIT
"""The sweep directory as any process on any login node reads it, with no daemon.

- :mod:`.manifest`: the sweep root: its manifest (a cache rebuilt from the cell sidecars),
  its lock, the cells' status records, and a cell's place on the grid;
- :mod:`.liveness`: the owner a ``running`` cell names (host, pid, start time, SLURM job),
  and whether it is still alive;
- :mod:`.board`: every cell's state, owner, timing, metrics and error, as readers show it,
  and which job of a submission runs a waiting cell;
- :mod:`.settled`: a finished sweep read without opening every file: from its manifest
  (``status``, ``show``, ``load_experiment``) or the completed cells' index (a resume);
- :mod:`.progress`: the progress bar over the cells, fed by their sidecars;
- :mod:`.logs`: every rank's output of a cell, found from the cell alone;
- :mod:`.cancel`: stop cells (``scancel``, or signals to local owners): the one writer here.

Must not import hydra, omegaconf, numpy, xarray, submitit or torch (``scripts/check-imports``
bans them): ``status``, ``ls``, ``logs``, ``wait`` and ``cancel`` load this room, from any
shell, many times a day. Runs nothing a sidecar names before it is checked.
"""
