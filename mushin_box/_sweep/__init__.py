# SPDX-License-Identifier: MIT
"""Sweeps: Workflow, the cell runner and its reuse/skip/run decision, the manifest,
progress, experiment loading, diff, and the ``launch`` plan behind the CLI.

Parses no command-line arguments (that is :mod:`mushin_box.cli`).
"""
