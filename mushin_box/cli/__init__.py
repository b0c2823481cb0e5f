# SPDX-License-Identifier: MIT
"""The ``mushin-box`` command line: parsing and printing only, one module per command.

Each command module (:data:`.main.COMMANDS`) exposes ``HELP``, ``EXAMPLES``, ``EXITS``,
``add_arguments(parser)`` and ``run(args) -> int``; :mod:`.main` builds the parser and
turns the kit's errors into one line and exit code 2. :mod:`.tables` holds what several
commands print alike.

Must not hold business logic: a command parses, calls one function of a room, and prints.

Cheap start: every command imports every command module (to build the parser), so a
command module imports the rooms it calls, and rich, inside the functions that use them.
"""
