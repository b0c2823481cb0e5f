# SPDX-License-Identifier: MIT
"""``mushin-box launch --print-config``: the config the sweep's first cell would receive.

Composed as ``Workflow.run`` composes it (each sweep at its first value), nothing written:
secret values leave first, as the ``${oc.env:MUSHIN_SECRET_...}`` references the task
resolves. Printed unresolved, as Hydra's ``--cfg job`` (resolving would read the
environment into the output); a moved value still showing is cut out when at least
``MIN_SCRUB_LENGTH`` long (a shorter one would match anywhere).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from mushin_box._core.redact import MIN_SCRUB_LENGTH, redact_text
from mushin_box._core.secrets import SecretVault
from mushin_box._sweep.compose import first_job, hydra_state_kept
from mushin_box._sweep.validate import is_config_group
from mushin_box._sweep.workflow import Workflow

#: the vault's references, kept whole (a short value may be part of a name's hex digits)
_NAME = r"\$\{oc\.env:MUSHIN_SECRET_[0-9A-F]+\}"
_REFERENCE = re.compile(rf"(\$\{{oc\.decode:{_NAME}\}}|{_NAME})")


def first_cell_config(target: Any, overrides: Sequence[str]) -> str:
    """The first cell's composed config as YAML, secrets shown as references; a ValueError
    for a sweep over a secret-looking key, Hydra's own error for an override it refuses.

    >>> from hydra_zen import make_config
    >>> print(first_cell_config(make_config(lr=0.1, api_key="abc"), ["lr=0.5,1.0"]), end="")
    lr: 0.5
    api_key: ${oc.env:MUSHIN_SECRET_2E9BC6C94A4CBDFE}
    """
    from hydra import compose, initialize
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    workflow = target if isinstance(target, Workflow) else None
    vault = SecretVault(workflow.secrets if workflow is not None else ())
    config = vault.hide_in_config(workflow.config if workflow is not None else target)
    hidden = vault.hide_in_overrides(
        list(overrides), is_config_key=lambda key: not is_config_group(key)
    )
    name = f"mushin_print_{uuid.uuid4().hex}"
    ConfigStore.instance().store(name=name, node=config)
    try:
        with hydra_state_kept(), initialize(version_base="1.3", config_path=None):
            cfg = compose(name, overrides=first_job(hidden))
    finally:
        ConfigStore.instance().repo.pop(f"{name}.yaml", None)
    return _scrub(OmegaConf.to_yaml(cfg), vault.values)


def _scrub(text: str, values: Mapping[str, str]) -> str:
    """``text`` with the vault's long enough ``values`` cut out, outside its references.

    >>> _scrub("a: ${oc.env:MUSHIN_SECRET_0A1B}\\nb: hunter22\\nc: 1\\n",
    ...        {"MUSHIN_SECRET_0A1B": "hunter22", "MUSHIN_SECRET_2C3D": "1"})
    'a: ${oc.env:MUSHIN_SECRET_0A1B}\\nb: <redacted>\\nc: 1\\n'
    """

    found = {k: v for k, v in values.items() if len(v) >= MIN_SCRUB_LENGTH}
    if not found:
        return text
    parts = _REFERENCE.split(text)  # odd positions: the references
    return "".join(p if i % 2 else redact_text(p, found) for i, p in enumerate(parts))
