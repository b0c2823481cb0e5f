# SPDX-License-Identifier: MIT
"""Hydra's ``.hydra/*.yaml`` text, written by libyaml's emitter where it is the same text
as OmegaConf's own (PyYAML's Python emitter): a config of plain text, any shape."""

from __future__ import annotations

import string
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

from mushin_box._sweep import hydrafiles

pytestmark = pytest.mark.floor  # the floor job's subset (scripts/floor)

#: printable ASCII and line breaks: the text the fast path takes
PLAIN = st.text(
    alphabet=string.printable.replace("\t", "")
    .replace("\r", "")
    .replace("\x0b", "")
    .replace("\x0c", ""),
    max_size=120,
)
#: every kind of text, for the texts it must leave to OmegaConf
ANY_TEXT = st.text(max_size=40)

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    PLAIN,
    st.sampled_from(
        [
            "yes",
            "no",
            "on",
            "1",
            "1.5",
            "1e3",
            "null",
            "~",
            "- a",
            "a: b",
            "#x",
            "'q'",
            '"q"',
            "{a}",
            "[a]",
            "${x}",
            "a\n",
            "\n",
            " a",
            "a ",
            "---",
            "...",
        ]
    ),
)


def _config(tree: Any) -> Any:
    """The config of ``tree``; a tree OmegaConf refuses (a broken ``${``) is not a case."""
    try:
        cfg = OmegaConf.create(tree)
        OmegaConf.to_yaml(cfg)
    except Exception:
        assume(False)
    return cfg


def configs(leaves: Any) -> Any:
    keys = st.one_of(PLAIN.filter(bool), st.sampled_from(["1", "yes", "a b", "-", "?"]))
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)
        ),
        max_leaves=20,
    ).map(lambda tree: {"root": tree})


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs(SCALARS))
def test_plain_configs_get_omegaconfs_own_text(tree: Any) -> None:
    cfg = _config(tree)
    assert hydrafiles.to_yaml(cfg) == OmegaConf.to_yaml(cfg)


@settings(max_examples=200, deadline=None)
@given(configs(st.one_of(SCALARS, ANY_TEXT)))
def test_any_config_gets_omegaconfs_own_text(tree: Any) -> None:
    cfg = _config(tree)
    assert hydrafiles.to_yaml(cfg) == OmegaConf.to_yaml(cfg)


@pytest.mark.parametrize("text", ["caf\u00e9", "tab\there", "cr\rlf", "\x85", "\u2028", "\ufeff"])
def test_text_beyond_printable_ascii_is_left_to_omegaconf(text: str) -> None:
    assert not hydrafiles._plain({"k": [text]})
    cfg = OmegaConf.create({"k": text})
    assert hydrafiles.to_yaml(cfg) == OmegaConf.to_yaml(cfg)
