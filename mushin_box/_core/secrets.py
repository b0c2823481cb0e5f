# SPDX-License-Identifier: MIT
"""Keep secret values out of every file a sweep writes: they travel in the environment.

Hydra writes each job's config and overrides to ``.hydra/*.yaml`` and submitit pickles the
job: redacting those afterwards would be too late. So before a launch :class:`SecretVault`
replaces each secret (a string or number at a secret-looking path, a URL's credentials) by
``${oc.env:MUSHIN_SECRET_<hash of its config path>}``, named after the *path* so that a
cell's fingerprint does not depend on it, and exports the value under that name (and as
``APPTAINERENV_<name>``, which reaches ranks even with ``--cleanenv``), with the declared
names (``SECRET_NAMES_ENV``): every process of the launch redacts what the driver hid.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from mushin_box._core.envstate import environ_set
from mushin_box._core.layout import SECRET_ENV_PREFIX, SECRET_NAMES_ENV
from mushin_box._core.overrideparse import is_hydra_key, parse_overrides
from mushin_box._core.overrides import (
    Interpolation,
    format_value,
    parse_override_value,
    parse_sweep_values,
)
from mushin_box._core.redact import (
    URL_CREDENTIALS,
    check_secret_names,
    is_secret_name,
    secret_names_in_effect,
)

_APPTAINER = "APPTAINERENV_"


def _is_secret_leaf(path: str, value: Any, declared: Sequence[str] = ()) -> bool:
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, str):
        if not value or value == "???":  # empty, missing
            return False
        if "${" in value:
            # already a reference (e.g. "Bearer ${oc.env:TOKEN}"); but a URL whose
            # credentials are literal cannot travel by reference with its interpolation
            for match in URL_CREDENTIALS.finditer(value):
                if "${" not in match.group("userinfo"):
                    raise ValueError(
                        f"{path}: a URL with literal credentials that also holds an "
                        "interpolation cannot be kept out of Hydra's files. Fix: put the "
                        "credentials in the environment, e.g. "
                        "'postgres://${oc.env:DB_USER}:${oc.env:DB_PASSWORD}@${host}/db'"
                    )
            return False
        return is_secret_name(path, declared) or URL_CREDENTIALS.search(value) is not None
    return isinstance(value, int | float) and is_secret_name(path, declared)


class SecretVault:
    """Secret values moved out of a sweep's config into environment variables.

    >>> import os
    >>> vault = SecretVault()
    >>> vault.hide("db", {"host": "h", "password": "hunter2"})
    {'host': 'h', 'password': '${oc.env:MUSHIN_SECRET_5CC7921ACE77C467}'}
    >>> with vault.exported():
    ...     os.environ["MUSHIN_SECRET_5CC7921ACE77C467"]
    'hunter2'
    >>> "MUSHIN_SECRET_5CC7921ACE77C467" in os.environ
    False

    ``names`` declares more secrets: config key names (at any depth) or dotted paths from
    the config's root:

    >>> SecretVault(["db.dsn"]).hide("db", {"dsn": "u@h", "host": "h"})
    {'dsn': '${oc.env:MUSHIN_SECRET_DC3406CBD7B57982}', 'host': 'h'}
    """

    def __init__(self, names: Sequence[str] = ()) -> None:
        self.values: dict[str, str] = {}
        self._names = check_secret_names(names, where="secrets")

    @functools.cached_property
    def declared(self) -> tuple[str, ...]:
        """The project's secret names and the vault's, read on first use: a bad project
        setting is then the first ``hide*`` call's ``ValueError``."""
        return secret_names_in_effect(self._names)

    @staticmethod
    def env_name(path: str) -> str:
        """``MUSHIN_SECRET_<16 hex digits of sha256(path)>``: stable per config path."""
        return SECRET_ENV_PREFIX + hashlib.sha256(path.encode("utf-8")).hexdigest()[:16].upper()

    def reference(self, path: str, value: str | int | float) -> Interpolation:
        """Store ``value`` and return the interpolation that reads it back."""
        name = self.env_name(path)
        if isinstance(value, str):
            self.values[name] = value
            return Interpolation(f"${{oc.env:{name}}}")
        self.values[name] = repr(value)  # read back with its type by oc.decode
        return Interpolation(f"${{oc.decode:${{oc.env:{name}}}}}")

    def hide(self, path: str, value: Any) -> Any:
        """A copy of a plain value (at config ``path``) with its secret leaves replaced."""
        if isinstance(value, Mapping):
            return {k: self.hide(f"{path}.{k}" if path else str(k), v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.hide(f"{path}.{i}", v) for i, v in enumerate(value)]
        if _is_secret_leaf(path, value, self.declared):
            return self.reference(path, value)
        return value

    def hide_in_config(self, config: Any, *, plain: bool = False) -> Any:
        """``config`` (structured) as a DictConfig with its secret leaves as references, or
        itself when it holds none; ``plain``: an untyped struct DictConfig, for launchers that
        pickle the job (submitit pickles a structured one's dataclass, defaults included)."""
        from omegaconf import OmegaConf, SCMode

        declared = self.declared  # a bad project setting is refused before anything runs
        try:
            cfg = OmegaConf.structured(config)
            container = OmegaConf.to_container(cfg, resolve=False, enum_to_str=True)
        except Exception:  # pragma: no cover - exotic configs: left as they are
            return config
        found = [(p, v) for p, v in _leaves(container, "") if p and _is_secret_leaf(p, v, declared)]
        if not found:
            return config
        if plain:
            cfg = OmegaConf.create(
                OmegaConf.to_container(cfg, resolve=False, structured_config_mode=SCMode.DICT)
            )
            OmegaConf.set_struct(cfg, True)
        for path, value in found:
            OmegaConf.update(cfg, path, str(self.reference(path, value)), merge=False)
        return cfg

    def hide_in_overrides(
        self, overrides: Sequence[str], *, is_config_key: Any = lambda key: True
    ) -> list[str]:
        """Raw Hydra overrides with secret values replaced by references (a sweep over one is
        refused); ``is_config_key(key)`` tells a value from a config *group*'s option name."""
        from hydra.core.override_parser.types import OverrideType

        declared = self.declared
        parsed = parse_overrides(overrides)
        out: list[str] = []
        for text, o in zip(overrides, parsed, strict=True):
            key = o.key_or_group
            kept = is_hydra_key(key) or o.type == OverrideType.DEL or o.package
            added = o.type in (OverrideType.ADD, OverrideType.FORCE_ADD)
            if not kept and o.is_sweep_override():
                try:
                    values = parse_sweep_values(text.split("=", 1)[1], keep_interpolations=True)
                except ValueError:  # range()/interval sweeps: numbers, never hidden
                    values = []
                if any(_is_secret_leaf(key, v, declared) for v in values):
                    raise sweep_error(key)
            elif not kept and (added or is_config_key(key)):
                value = parse_override_value(text.split("=", 1)[1], keep_interpolations=True)
                hidden = self.hide(key, value)
                if hidden is not value and hidden != value:  # a hidden leaf is a reference
                    prefix = text[: len(text) - len(text.lstrip("+"))]
                    text = f"{prefix}{key}={format_value(_keep_raw_interpolations(hidden))}"
            out.append(text)
        return out

    @contextlib.contextmanager
    def exported(self) -> Iterator[None]:
        """The stored values and declared names in ``os.environ`` (and ``APPTAINERENV_``)."""
        # always, even empty: a rank applies the driver's names, not its own cwd's project
        carried = {SECRET_NAMES_ENV: json.dumps(list(self.declared))}
        values = {
            key: value
            for name, value in {**self.values, **carried}.items()
            for key in (name, _APPTAINER + name)
        }
        with environ_set(values):
            yield


def _leaves(node: Any, path: str) -> Iterator[tuple[str, Any]]:
    """Each leaf of a plain config value, with its dotted path from ``path``."""
    if isinstance(node, Mapping):
        for k, v in node.items():
            yield from _leaves(v, f"{path}.{k}" if path else str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _leaves(v, f"{path}.{i}")
    else:
        yield path, node


def _keep_raw_interpolations(value: Any) -> Any:
    """Strings parsed from a raw override that hold ``${``: live interpolations, kept so."""
    if isinstance(value, str) and not isinstance(value, Interpolation) and "${" in value:
        return Interpolation(value)
    if isinstance(value, Mapping):
        return {k: _keep_raw_interpolations(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_keep_raw_interpolations(v) for v in value]
    return value


def sweep_error(key: str) -> ValueError:
    """The error for a sweep over a secret-looking key."""
    return ValueError(
        f"cannot sweep over {key!r}: its name looks like a secret, and swept values name "
        "the cells' directories and appear in the sweep's records. Fix: rename the key if "
        "it is not a secret, or sweep over a non-secret alias that the task maps to the "
        "secret (e.g. read it from the environment)"
    )
