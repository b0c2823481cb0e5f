# SPDX-License-Identifier: MIT
"""The seams: every private name of an upstream package is reached here, and only here.

One module per upstream (``hydra``, ``omegaconf``, ``submitit``, ``lightning``,
``torch``). Each wraps what the kit needs from that package's private API in a small
function or class with a public-looking name, says at the seam why no public API does it,
and has a test of the behaviour the kit relies on in ``tests/upstream/`` whose name says
which upstream changed what when it fails. ``scripts/check-imports`` refuses a private
upstream name anywhere else, so an upstream release that moves a private name breaks one
module and one named test, not the package.

- :mod:`.hydra`: Hydra's (``hydra._internal``: the override function, the basic sweeper and
  launcher; the writer of a job's ``.hydra`` files, the singleton table, a job's return).
- :mod:`.omegaconf`: OmegaConf's (a node as written, whether it is settled, the YAML dumper).
- :mod:`.submitit`: submitit's (the command its tasks run, the sbatch script and ``--mem``).
- :mod:`.lightning`: Lightning's, in both namespaces (the launcher hooks, ``Trainer._results``).
- :mod:`.torch`: torch's (torchrun's log record of a failed worker, read in its agent).

Must not import another room (rank 0, beside ``_core``: a seam knows its upstream only),
nor hold the kit's logic: a seam wraps one private name in what the kit needs of it.
Importing this package imports no upstream; import the one seam you need.
"""
