# SPDX-License-Identifier: MIT
"""SLURM host lists: expand/compress, hand-written cases, round trip, and scontrol itself."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from mushin_box._core.hostlist import MAX_RANGE, compress_hostlist, expand_hostlist

pytestmark = pytest.mark.floor  # the floor job's subset (scripts/floor)

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ---------------------------------------------------------------------------- by hand


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("", []),
        ("  ", []),
        ("cpu7", ["cpu7"]),
        ("gpu[001-004,010],cpu7", ["gpu001", "gpu002", "gpu003", "gpu004", "gpu010", "cpu7"]),
        ("n[9-11]", ["n9", "n10", "n11"]),
        ("n[08-10]", ["n08", "n09", "n10"]),
        ("n[001-3]", ["n001", "n002", "n003"]),  # width from the low end
        ("n[1-003]", ["n1", "n2", "n3"]),
        ("n[5]", ["n5"]),
        ("n[05]", ["n05"]),
        ("[1-2]", ["1", "2"]),
        ("a[1-2],b[3-4]", ["a1", "a2", "b3", "b4"]),
        ("a[1-3,2]", ["a1", "a2", "a3", "a2"]),  # duplicates kept, in order
        ("a[2,1]", ["a2", "a1"]),
        ("a1,a1", ["a1", "a1"]),
        ("rack[1-2]-node[01-02]", ["rack1-node01", "rack1-node02", "rack2-node01", "rack2-node02"]),
        ("a[1-2][3-4]", ["a13", "a14", "a23", "a24"]),
        # SLURM's order for 3+ groups: the group before the last is the slowest
        ("a[1-3]b[1-2]c[5]", ["a1b1c5", "a2b1c5", "a3b1c5", "a1b2c5", "a2b2c5", "a3b2c5"]),
        ("a.b-c_d", ["a.b-c_d"]),
        ("a1-2", ["a1-2"]),
        (" gpu[1-2] ", ["gpu1", "gpu2"]),
    ],
)
def test_expand_by_hand(text: str, names: list[str]) -> None:
    assert expand_hostlist(text) == names


def test_expand_four_groups_order() -> None:
    names = expand_hostlist("a[1-2]b[1-2]c[1-2]d[1-2]")
    assert names[:8] == [
        "a1b1c1d1",
        "a1b1c1d2",
        "a2b1c1d1",
        "a2b1c1d2",
        "a1b2c1d1",
        "a1b2c1d2",
        "a2b2c1d1",
        "a2b2c1d2",
    ]
    assert len(names) == 16 == len(set(names))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a[1-2", r"position 1: '\[' is never closed"),
        ("a]", r"position 1: '\]' without a matching '\['"),
        ("a[[1]]", "nested"),
        ("a[]", "empty brackets"),
        ("a[3-1]", "runs backwards"),
        ("a[1,,2]", "empty range"),
        ("a[-1]", "not 'N' or 'N-M'"),
        ("a[1-]", "not 'N' or 'N-M'"),
        ("a[x1]", "not 'N' or 'N-M'"),
        ("a[ 1]", "whitespace"),
        ("a b", "whitespace"),
        ("a,,b", "empty entry"),
        (",a", "empty entry"),
        ("a,", "empty entry"),
        ("a[1-2]b", "after the last"),
        ("a[1-2]-", "after the last"),
        (f"a[1-{MAX_RANGE + 1}]", "more than"),
    ],
)
def test_expand_rejects_malformed(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        expand_hostlist(text)


def test_expand_rejects_non_str() -> None:
    with pytest.raises(TypeError):
        expand_hostlist(None)  # type: ignore[arg-type]


def test_expand_guards_against_explosions() -> None:
    with pytest.raises(ValueError, match="expands to"):
        expand_hostlist("a[1-60000]b[1-60000]")


@pytest.mark.parametrize(
    ("names", "text"),
    [
        ([], ""),
        (["cpu7"], "cpu7"),
        (["gpu001", "gpu002", "gpu003", "gpu010", "cpu7"], "gpu[001-003,010],cpu7"),
        (["n9", "n10", "n11"], "n[9-11]"),
        (["n09", "n10"], "n[09-10]"),
        (["n1", "n01"], "n[1,01]"),
        (["n2", "n1"], "n[2,1]"),
        (["b", "a1", "a1"], "b,a[1,1]"),
        (["1", "2", "x"], "[1-2],x"),
    ],
)
def test_compress_by_hand(names: list[str], text: str) -> None:
    assert compress_hostlist(names) == text
    assert expand_hostlist(text) == names


@pytest.mark.parametrize("bad", ["", "a b", "a,b", "a[1]", "x]", "tab\there"])
def test_compress_rejects_names_that_cannot_be_listed(bad: str) -> None:
    with pytest.raises(ValueError, match="host name|must not be empty"):
        compress_hostlist([bad])


def test_compress_rejects_non_str() -> None:
    with pytest.raises(TypeError):
        compress_hostlist([1])  # type: ignore[list-item]


# ---------------------------------------------------------------------------- properties

_prefix = st.text(alphabet="abcxyz-._", min_size=0, max_size=4)
_number = st.integers(min_value=0, max_value=1200)
_width = st.integers(min_value=0, max_value=5)


@st.composite
def host_names(draw: st.DrawFn) -> str:
    prefix = draw(_prefix)
    if draw(st.booleans()) or not prefix:
        return prefix + str(draw(_number)).zfill(draw(_width))
    return prefix


@st.composite
def runs_of_names(draw: st.DrawFn) -> list[str]:
    """Lists with realistic structure: runs of consecutive numbers, padded or not."""
    out: list[str] = []
    for _ in range(draw(st.integers(0, 6))):
        if draw(st.booleans()):
            prefix = draw(_prefix)
            start, width = draw(_number), draw(_width)
            out += [
                prefix + str(n).zfill(width) for n in range(start, start + draw(st.integers(1, 12)))
            ]
        else:
            out.append(draw(host_names()))
    return out


@SETTINGS
@given(st.lists(host_names(), max_size=30) | runs_of_names())
def test_round_trip(names: list[str]) -> None:
    text = compress_hostlist(names)
    assert expand_hostlist(text) == names
    assert compress_hostlist(expand_hostlist(text)) == text  # compress is a fixed point


@SETTINGS
@given(runs_of_names())
def test_compress_is_never_longer_than_the_plain_list(names: list[str]) -> None:
    assert len(compress_hostlist(names)) <= len(",".join(names)) + 2 * len(names)


@st.composite
def expressions(draw: st.DrawFn) -> str:
    """Valid expressions of the whole grammar: several entries, groups, ranges, widths."""
    entries: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        groups = draw(st.integers(0, 3))
        text = draw(st.text(alphabet="abnode-", min_size=0 if groups else 1, max_size=3))
        for g in range(groups):
            ranges = []
            for _ in range(draw(st.integers(1, 3))):
                lo = draw(st.integers(0, 120))
                hi = lo + draw(st.integers(0, 3))
                width = draw(st.integers(1, 4))
                lo_text = str(lo).zfill(width)
                ranges.append(lo_text if hi == lo else f"{lo_text}-{hi}")
            text += "[" + ",".join(ranges) + "]"
            if g < groups - 1:
                text += draw(st.text(alphabet="x-", min_size=0, max_size=2))
        entries.append(text)
    return ",".join(entries)


@SETTINGS
@given(expressions())
def test_expressions_round_trip_through_compress(text: str) -> None:
    names = expand_hostlist(text)
    assert expand_hostlist(compress_hostlist(names)) == names


# ---------------------------------------------------------------------------- scontrol

_SCONTROL_EXAMPLES = 200


def _scontrol(expr: str) -> list[str]:
    out = subprocess.run(
        ["scontrol", "show", "hostnames", expr],
        capture_output=True,
        text=True,
        timeout=30,
        env=os.environ.copy(),
    )
    text = out.stdout + out.stderr
    if "Invalid" in text or "error" in text:
        raise AssertionError(f"scontrol rejected {expr!r}: {text.strip()}")
    return out.stdout.split()


@pytest.mark.slurm
def test_matches_scontrol(slurm_cluster: object) -> None:
    """expand_hostlist agrees with `scontrol show hostnames` on ~200 generated expressions
    (hypothesis drives the generation; one scontrol call per example), and so does
    compress_hostlist's output for the same names."""
    if shutil.which("scontrol") is None:  # pragma: no cover - the fixture needs it too
        pytest.skip("scontrol not on PATH")

    @settings(
        max_examples=_SCONTROL_EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        database=None,
    )
    @given(expressions() | runs_of_names().filter(bool).map(compress_hostlist))
    def check(expr: str) -> None:
        assume(not expr.startswith("-"))  # scontrol would take it for an option
        names = expand_hostlist(expr)
        assert _scontrol(expr) == names, expr
        compressed = compress_hostlist(names)
        if compressed != expr:
            assert _scontrol(compressed) == names, (expr, compressed)

    check()


@pytest.mark.slurm
@pytest.mark.parametrize(
    "expr",
    ["gpu[001-004,010],cpu7", "rack[1-2]-node[01-02]", "a[1-3]b[1-2]c[5]", "n[9-11,08]", "[1-2]"],
)
def test_hand_cases_match_scontrol(slurm_cluster: object, expr: str) -> None:
    assert _scontrol(expr) == expand_hostlist(expr)
