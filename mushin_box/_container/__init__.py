# SPDX-License-Identifier: MIT
"""The submit-time side of running ranks in an image: launch values (binds, NCCL
profile, image identity), the rank wrapper (env file and argv), pre-flight and the smoke run.

Builds no image (that is :mod:`mushin_box._image`).
"""
