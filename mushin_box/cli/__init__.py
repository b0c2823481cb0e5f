# SPDX-License-Identifier: MIT
"""The ``mushin-box`` command line: parsing and printing only, one module per command.

Each command module exposes ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``;
:mod:`.main` builds the parser and maps errors to exit codes.
"""
