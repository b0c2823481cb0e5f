# SPDX-License-Identifier: MIT
"""The ``mushin-box`` command line: parsing and printing only, one module per command.

Each command module (``build``, ``launch``, ``status``, ...: the list is
:data:`.main.COMMANDS`) exposes ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``;
:mod:`.main` builds the parser and maps errors to exit codes. :mod:`.tables` holds what
several commands print alike.

Must not hold business logic: a command parses, calls one function of a room, and prints.
"""
