# SPDX-License-Identifier: MIT
"""The seams: every private name of an upstream package is reached here, and only here.

One module per upstream, each name with a public-looking name, the reason no public API
does it, and a test in ``tests/upstream/`` that names the upstream change when it fails.
``scripts/check-imports`` refuses a private upstream name anywhere else, so an upstream
release that moves one breaks one module and one named test, not the package.

- :mod:`.hydra`: Hydra's (overrides applied, the basic sweeper and launcher, the ``.hydra``
  file writer, the singleton table, a job's return);
- :mod:`.omegaconf`: OmegaConf's (a node as written, whether it is settled);
- :mod:`.submitit`: submitit's (the command its tasks run, the sbatch script and ``--mem``);
- :mod:`.lightning`: Lightning's, in both namespaces (the launcher hooks, ``Trainer._results``);
- :mod:`.torch`: torch's (how torch elastic records a failed worker).

Must not import another room, nor hold the kit's logic. Importing this package imports no
upstream; import the one seam you need.
"""
