# SPDX-License-Identifier: MIT
"""The one line a launch prints for an override Hydra refuses, and its fix, decided from the
exception's structure (its cause's type and key), not from Hydra's words."""

from __future__ import annotations

import pytest
from hydra.errors import ConfigCompositionException
from hydra_zen import make_config
from omegaconf.errors import ConfigAttributeError

from mushin_box._launch.plan import hydra_error_line
from mushin_box._sweep.compose import check_composes

CONFIG = make_config(lr=0.1, module=make_config(width=4))


def _refusal(overrides: list[str], config: object = CONFIG) -> BaseException:
    with pytest.raises(ConfigCompositionException) as info:
        check_composes(config, overrides)
    return info.value


@pytest.mark.parametrize(
    ("override", "line"),
    [
        ("lrr=0.1", "Could not override 'lrr': Key 'lrr' not in 'Config'; "),
        ("module.depth=2", "Could not override 'module.depth': Key 'depth' not in 'Config'; "),
    ],
)
def test_an_override_of_a_key_the_config_lacks_says_how_to_add_it(override: str, line: str) -> None:
    text = hydra_error_line(_refusal([override]), [override])
    assert text == f"{line}to add it on purpose, write +{override}"


def test_the_fix_for_a_swept_key_the_config_lacks_is_the_users_whole_sweep() -> None:
    # Hydra names the first job's override (lrr=0.1); the fix adds the sweep as written
    text = hydra_error_line(_refusal(["lrr=0.1,0.2"]), ["module.width=8", "lrr=0.1,0.2"])
    assert text.endswith("; to add it on purpose, write +lrr=0.1,0.2")


def test_the_fix_is_decided_from_the_cause_not_from_hydras_words() -> None:
    error = ConfigCompositionException("whatever Hydra says in its next release")
    cause = ConfigAttributeError("Key 'lrr' not in 'Config'")
    cause.full_key = "lrr"
    error.__cause__ = cause
    assert hydra_error_line(error, ["lrr=1"]) == (
        "Could not override 'lrr': Key 'lrr' not in 'Config'; to add it on purpose, write +lrr=1"
    )


def test_a_refusal_that_is_not_a_missing_key_is_hydras_message_on_one_line() -> None:
    # '+' on a key that exists: Hydra's own fix, on one line, and no '+' advice of ours
    text = hydra_error_line(_refusal(["+lr=1"]), ["+lr=1"])
    assert "to add it on purpose" not in text
    assert "Could not append to config. An item is already at 'lr'. Either remove + prefix" in text
    assert "\n" not in text


class MLP:
    def __init__(self, depth: int = 2, lr: float = 0.1) -> None:
        self.depth, self.lr = depth, lr


def test_a_parameter_that_builds_left_out_names_populate_full_signature() -> None:
    # hydra-zen's newcomer error: builds(MLP) holds only what it was given, not lr
    from hydra_zen import builds

    config = make_config(module=builds(MLP, depth=3))
    error = _refusal(["module.lr=0.01"], config)
    assert hydra_error_line(error, ["module.lr=0.01"], config).endswith(
        "; 'lr' is a parameter of MLP that the config's builds(MLP) left out: write "
        "builds(MLP, populate_full_signature=True) in the experiment, or write +module.lr=0.01"
    )
    # a key the target does not take either: only the '+' fix
    error = _refusal(["module.width=8"], config)
    text = hydra_error_line(error, ["module.width=8"], config)
    assert text.endswith("; to add it on purpose, write +module.width=8")
