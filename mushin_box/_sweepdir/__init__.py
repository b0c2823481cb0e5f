# SPDX-License-Identifier: MIT
"""The sweep directory as any process on any login node reads it, with no daemon.

- :mod:`.manifest`: the sweep's manifest (a cache of the cells' status records), its lock,
  the status records, and a cell's place on the grid;
- :mod:`.liveness`: whether the owner a ``running`` cell names is still alive;
- :mod:`.board`: every cell as readers show it, and which job runs a waiting cell;
- :mod:`.settled`: a finished sweep read from its manifest, or its completed cells' index;
- :mod:`.progress`: the progress bar over the cells, fed by their sidecars;
- :mod:`.logs`: every rank's output of a cell, found from the cell alone;
- :mod:`.cancel`: stop cells (``scancel``, or signals to local owners): the one writer here.

Must not import hydra, omegaconf, numpy, xarray, submitit or torch: ``status``, ``ls``,
``logs``, ``wait`` and ``cancel`` load this room many times a day. Runs nothing a sidecar
names before it is checked.
"""
