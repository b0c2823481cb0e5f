# SPDX-License-Identifier: MIT
"""The disk and rank-env contract, shared by every room: file names and ``MUSHIN_*``
variables (:mod:`.layout`), the secret rule and redaction (:mod:`.redact`), the secrets vault,
atomic canonical sidecars, the job directory, override formatting and hostlists.

Imports no other room, and no torch or Lightning.
"""
