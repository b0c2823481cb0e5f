# SPDX-License-Identifier: MIT
"""The package version: one place, read by the CLI, the image manifest and provenance."""

__version__ = "0.1.0"
