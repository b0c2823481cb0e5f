"""Round-trip tests for :mod:`mushin_box._core.overrides` through Hydra's own parser."""

from __future__ import annotations

import enum
import math
import pathlib
from typing import Any

import numpy as np
import pytest
from conftest import assert_same
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import OverrideType
from hydra_zen import launch, make_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

from mushin_box._core.overrides import (
    format_override,
    format_sweep,
    format_value,
    parse_override_value,
    parse_sweep_values,
)

pytestmark = pytest.mark.floor  # the floor job's subset (scripts/floor)

PARSER = OverridesParser.create()
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Examples that go through the sweeper are slower: fewer of them keep the suite fast.
SLOW_SETTINGS = settings(SETTINGS, max_examples=40)

# ---------------------------------------------------------------------------- helpers


def task_sees(value: Any) -> Any:
    """What a task reads for ``value`` once Hydra stored it in an OmegaConf config."""
    container: Any = OmegaConf.to_container(OmegaConf.create({"v": value}), resolve=True)
    return container["v"]


def job_values(override: str) -> list[Any]:
    """Run ``override`` through Hydra's basic sweeper as a multirun would.

    The sweeper re-serializes every value into one override per job; each job override
    is parsed again and its value stored in OmegaConf.
    """
    parsed = PARSER.parse_overrides([override])
    (batch,) = BasicSweeper.split_arguments(parsed, None)
    values: list[Any] = []
    for (job_override,) in batch:
        (job,) = PARSER.parse_overrides([job_override])
        assert not job.is_sweep_override()
        values.append(task_sees(job.value()))
    return values


# ------------------------------------------------------------------------- strategies

TRICKY = "'\"\\,=$ {}[]():\t\n\r`#~@|*%!?^&;<>/.-+"

texts = st.text(
    alphabet=st.sampled_from(TRICKY)
    | st.characters(exclude_characters="\x00", exclude_categories=("Cs",)),
    max_size=30,
).filter(lambda s: s != "???")
# Plus literal fragments that matter to Hydra / OmegaConf.
texts = texts | st.lists(
    st.sampled_from(["${", "\\${", "\\\\", "'", '"', "\\'", "}", "$", "a", " ", "\n"]),
    max_size=8,
).map("".join).filter(lambda s: s != "???")

floats = st.floats() | st.sampled_from(
    [
        float("nan"),
        float("inf"),
        float("-inf"),
        -0.0,
        0.0,
        1e300,
        -1e-300,
        5e-324,
        1.7976931348623157e308,
    ]
)
ints = st.integers() | st.integers(min_value=-(10**40), max_value=10**40)
scalars = st.none() | st.booleans() | ints | floats | texts
keys = st.from_regex(r"[A-Za-z_][A-Za-z0-9_-]{0,8}", fullmatch=True).filter(
    lambda k: k.lower() not in {"null", "true", "false", "inf", "nan"}
)
values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4),
    max_leaves=12,
)


# ----------------------------------------------------------------- format_value basics


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "null"),
        (True, "true"),
        (False, "false"),
        (0, "0"),
        (-12, "-12"),
        (0.1, "0.1"),
        (-0.0, "-0.0"),
        (1e300, "1e+300"),
        (float("nan"), "nan"),
        (float("inf"), "inf"),
        (float("-inf"), "-inf"),
        ("", "''"),
        ("a b", "'a b'"),
        ("it's", '"it\'s"'),
        ("a'\"", "'a\\'\"'"),
        ("a\\", "'a\\\\'"),
        ("${x}", "'\\${x}'"),
        ("\\${x}", "'\\\\\\${x}'"),
        ((1, "a"), "[1,'a']"),
        ({"a": [1, None], "b_2": {}}, "{a:[1,null],b_2:{}}"),
        (np.float64(0.5), "0.5"),
        (np.int64(3), "3"),
        (np.bool_(True), "true"),
        (np.array(2.5), "2.5"),
    ],
)
def test_format_value_examples(value: Any, expected: str) -> None:
    assert format_value(value) == expected


def test_hydra_parses_special_floats_case_insensitively() -> None:
    # The FLOAT token is [+-]?(inf|nan) in any case; we emit the lower-case forms.
    for text, check in [("nan", math.isnan), ("-inf", lambda v: v == -math.inf)]:
        assert check(parse_override_value(text))
    assert parse_override_value("NaN") != parse_override_value("NaN")


# --------------------------------------------------------------------- property tests


@SETTINGS
@given(text=texts)
def test_text_round_trips_through_hydra_parser(text: str) -> None:
    assert_same(parse_override_value(format_value(text)), text)


@SETTINGS
@given(value=values)
def test_value_round_trips_through_hydra_parser(value: Any) -> None:
    assert_same(parse_override_value(format_value(value)), value)


@SLOW_SETTINGS
@given(value=values)
def test_value_reaches_a_multirun_job_unchanged(value: Any) -> None:
    # The override as a whole, through the sweeper's re-serialization and OmegaConf.
    (seen,) = job_values(format_override("a.b", value, add=True))
    assert_same(seen, value)


@SETTINGS
@given(text=texts)
def test_omegaconf_reads_escaped_interpolations_literally(text: str) -> None:
    (override,) = PARSER.parse_overrides([format_override("k", text)])
    assert task_sees(override.value()) == text


@SLOW_SETTINGS
@given(sweep=st.lists(values, min_size=1, max_size=5, unique_by=format_value))
def test_sweep_round_trips(sweep: list[Any]) -> None:
    override = format_sweep("grp.key", sweep)
    key, _, text = override.partition("=")
    assert key == "grp.key"
    assert_same(parse_sweep_values(text), sweep)
    # Every job of the multirun receives exactly one of the values, in order.
    assert_same(job_values(override), sweep)
    if len(sweep) > 1 or not (sweep[0] is None or isinstance(sweep[0], str)):
        assert_same(parse_override_value(text), sweep)
        assert PARSER.parse_overrides([override])[0].is_sweep_override()


@SLOW_SETTINGS
@given(values=st.lists(texts | st.none(), min_size=2, max_size=4, unique=True))
def test_string_sweeps_keep_their_type(values: list[str | None]) -> None:
    # choice('1') would hand the job the int 1: the simple form keeps the quotes.
    assert_same(job_values(format_sweep("s", values)), values)


def test_sweep_forms() -> None:
    assert format_sweep("s", ["1", None, 2], add=True) == "+s='1',null,2"
    assert format_sweep("s", [2]) == "s=choice(2)"
    assert format_sweep("s", [[1, "a"]]) == "s=choice([1,'a'])"
    assert format_sweep("s", [{"a": "1"}]) == "s=choice({a:'1'})"
    # A single string / None cannot be a Hydra sweep: a plain override is the same job.
    assert format_sweep("s", ["1"]) == "s='1'"
    assert format_sweep("s", [None], force_add=True) == "++s=null"
    assert parse_sweep_values("'1'") == ["1"]
    assert parse_sweep_values("null") == [None]
    assert parse_sweep_values("choice([1,2])") == [[1, 2]]
    assert parse_sweep_values("range(3)") == [0, 1, 2]


def test_sweep_rejects_duplicates_naming_them() -> None:
    with pytest.raises(ValueError, match=r"duplicate.*'a' \(2x\).*nan \(3x\)"):
        format_sweep("s", ["a", float("nan"), 1, "a", float("nan"), float("nan")])
    with pytest.raises(ValueError, match="duplicate"):
        format_sweep("s", [(1, 2), [1, 2]])
    # Different types are different cells.
    assert format_sweep("s", [1, 1.0, True, "1"]) == "s=1,1.0,true,'1'"


def test_sweep_rejects_bad_value_lists() -> None:
    with pytest.raises(ValueError, match="no values"):
        format_sweep("s", [])
    with pytest.raises(TypeError, match="sequence"):
        format_sweep("s", "abc")
    with pytest.raises(TypeError, match="sequence"):
        format_sweep("s", {1, 2})  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- keys


@SLOW_SETTINGS
@given(
    key=st.from_regex(
        r"[A-Za-z_][A-Za-z0-9_-]{0,5}(\.([A-Za-z_][A-Za-z0-9_-]{0,5}|0|[1-9][0-9]{0,3})){0,3}",
        fullmatch=True,
    ),
    mode=st.sampled_from(["", "add", "force_add"]),
)
def test_valid_keys_round_trip(key: str, mode: str) -> None:
    override = format_override(key, 1, add=mode == "add", force_add=mode == "force_add")
    (parsed,) = PARSER.parse_overrides([override])
    assert parsed.key_or_group == key
    assert (
        parsed.type
        == {
            "": OverrideType.CHANGE,
            "add": OverrideType.ADD,
            "force_add": OverrideType.FORCE_ADD,
        }[mode]
    )


def test_group_keys() -> None:
    assert format_override("hydra/launcher", "basic") == "hydra/launcher='basic'"


@pytest.mark.parametrize(
    "key", ["", "+s", "~s", "a..b", ".a", "a.", "1a", "0.a", "a b", "a=b", "é", "a/1", "a.b/c"]
)
def test_invalid_keys(key: str) -> None:
    with pytest.raises(ValueError, match="invalid override key"):
        format_override(key, 1)
    with pytest.raises(ValueError, match="invalid override key"):
        format_sweep(key, [1, 2])


def test_key_type_and_prefix_flags() -> None:
    with pytest.raises(TypeError, match="keys must be str"):
        format_override(1, 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="add=True"):
        format_override("+s", 1)
    with pytest.raises(ValueError, match="at most one"):
        format_override("s", 1, add=True, force_add=True)


# ------------------------------------------------------------------ rejected values


class Color(enum.Enum):
    RED = "red"


@pytest.mark.parametrize(
    ("value", "type_name"),
    [
        (object(), "object"),
        ({1, 2}, "set"),
        (b"x", "bytes"),
        (pathlib.PurePosixPath("/tmp"), "PurePosixPath"),
        (1 + 2j, "complex"),
        (np.zeros(3), "ndarray"),
        ([1, [2, Color.RED]], "Color"),
    ],
)
def test_unsupported_types_raise_type_error(value: Any, type_name: str) -> None:
    with pytest.raises(TypeError, match=type_name):
        format_value(value)


def test_type_error_names_location() -> None:
    with pytest.raises(TypeError, match=r"at \[1\]\['a'\]"):
        format_value([1, {"a": object()}])
    with pytest.raises(TypeError, match="keys must be str"):
        format_value({1: 2})


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ("???", "missing"),
        (["ok", "???"], "missing"),
        ("a\x00b", "NUL"),
        ("\ud800", "surrogate"),
        ({"a b": 1}, "invalid dictionary key"),
        ({"true": 1}, "invalid dictionary key"),
        ({"NaN": 1}, "invalid dictionary key"),
        ({"1": 1}, "invalid dictionary key"),
    ],
)
def test_unrepresentable_values_raise_value_error(value: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        format_value(value)


def test_self_referencing_container() -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    with pytest.raises(ValueError, match="self-referencing"):
        format_value(loop)


def test_newlines_are_supported() -> None:
    text = "line 1\nline 2\r\n\ttab"
    assert parse_override_value(format_value(text)) == text


# ------------------------------------------------------------------- parsing helpers


def test_parse_override_value_interpolations() -> None:
    with pytest.raises(ValueError, match="interpolation"):
        parse_override_value("'${x}'")
    assert parse_override_value("'${x}'", keep_interpolations=True) == "${x}"
    assert parse_override_value("'a\\${x}'") == "a${x}"
    assert parse_override_value("'\\\\\\${x}'") == "\\${x}"


def test_parse_override_value_errors() -> None:
    with pytest.raises(ValueError, match="cannot parse"):
        parse_override_value("'unterminated")
    with pytest.raises(ValueError, match="INTERVAL_SWEEP"):
        parse_override_value("interval(0,1)")
    with pytest.raises(TypeError):
        parse_override_value(1)  # type: ignore[arg-type]


# ------------------------------------------------------------------------ end to end

# One job per top-level value (the case Hydra's choice() gets wrong) ...
E2E_SWEEP: list[Any] = [
    "1",
    'it\'s "quoted", a=b: c',
    "\\${oc.env:HOME}\\",
    None,
    float("nan"),
    [None, "a'b", {"k": "[1,2]"}],
]
# ... and many tricky strings in a constant override seen by every job.
E2E_CONSTANT: list[Any] = [
    "null",
    "  padded\t",
    "${x}",
    "$${",
    "é😀\u2028",
    "two\nlines\r\n",
    "'",
    '"',
    "",
    -0.0,
    float("inf"),
    {"d": {"e": "${y}"}},
]


def test_end_to_end_multirun(tmp_path: pathlib.Path) -> None:
    seen: list[Any] = []

    def task(cfg: Any) -> None:
        container: Any = OmegaConf.to_container(cfg, resolve=True)
        seen.append((container["s"], container["t"]))

    sweep_dir = tmp_path / "multi run, 'quoted'"
    launch(
        make_config(x=None),
        task,
        overrides=[
            format_override("hydra.sweep.dir", str(sweep_dir)),
            format_sweep("s", E2E_SWEEP, add=True),
            format_override("t", E2E_CONSTANT, add=True),
        ],
        multirun=True,
        version_base="1.3",
        with_log_configuration=False,
    )
    assert_same([s for s, _ in seen], E2E_SWEEP)
    for _, t in seen:
        assert_same(t, E2E_CONSTANT)
    assert sorted(p.name for p in sweep_dir.iterdir() if p.is_dir()) == sorted(
        str(i) for i in range(len(E2E_SWEEP))
    )
