# SPDX-License-Identifier: MIT
"""The seams: every private name of an upstream package is reached here, and only here.

One module per upstream (``hydra``, ``omegaconf``, ``submitit``, ``lightning``). Each wraps
what the kit needs from that package's private API in a small function or class with a
public-looking name, says at the seam why no public API does it, and has a test of the
behaviour the kit relies on in ``tests/upstream/`` whose name says which upstream changed
what when it fails. ``scripts/check-imports`` refuses a private upstream name anywhere else,
so an upstream release that moves a private name breaks one module and one named test, not
the package.

This room imports no other room (rank 0, beside ``_core``): a seam knows its upstream only.
Importing this package imports no upstream; import the one seam you need.
"""
