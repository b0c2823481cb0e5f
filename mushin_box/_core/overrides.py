"""Serialize Python values to Hydra's command-line override grammar (and back).

Hydra re-types an unquoted value (``1`` an int, ``a,b`` a sweep), so every value is a typed
literal: floats as their exact ``repr``, strings quoted with every ``${`` escaped (a real
interpolation is an :class:`Interpolation`). What the task could not receive unchanged is a
``ValueError``: ``"???"`` (OmegaConf's "missing"), NUL, lone surrogates, and dictionary keys
that are not plain identifiers (Hydra's grammar has no quoted keys).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any

from mushin_box._core.overrideparse import parse_overrides

# One segment of a config path, as Hydra's key lexer accepts it (ASCII only).
_IDENT = r"[A-Za-z_][A-Za-z0-9_-]*"
_KEY_RE = re.compile(
    rf"{_IDENT}(?:\.(?:{_IDENT}|0|[1-9][0-9]*))*"  # dotted path: a.b.0.c
    rf"|{_IDENT}(?:/{_IDENT})+"  # config group: hydra/launcher
)
_DICT_KEY_RE = re.compile(_IDENT)
# Identifiers that Hydra's value lexer turns into null / bool / float tokens.
_RESERVED_DICT_KEYS = frozenset({"null", "true", "false", "inf", "nan"})
# A run of backslashes followed by the start of an OmegaConf interpolation.
_INTERPOLATION_RE = re.compile(r"(\\*)\$\{")
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_MISSING = "???"


class Interpolation(str):
    """A string written into an override *as an OmegaConf interpolation* (``${`` not
    escaped), e.g. ``${oc.env:NAME}``, resolved when the task reads the value.

    >>> format_value({"token": Interpolation("${oc.env:TOKEN}"), "s": "${x}"})
    "{token:'${oc.env:TOKEN}',s:'\\\\${x}'}"
    """

    __slots__ = ()


def is_array_scalar(value: object) -> bool:
    """Whether ``value`` is a 0-d array-like scalar (numpy scalar, 0-d array/tensor)."""
    shape = getattr(value, "shape", None)
    return shape is not None and tuple(shape) == () and callable(getattr(value, "item", None))


def _quote(text: str) -> str:
    """Quote ``text`` for Hydra: the unescaped result of parsing it is exactly ``text``. A
    run of backslashes before a quote or the closing quote is doubled."""
    quote = '"' if text.count("'") > text.count('"') else "'"
    body = re.sub(
        rf"(\\*)({quote}|\Z)",
        lambda m: m.group(1) * 2 + ("\\" + quote if m.group(2) else ""),
        text,
    )
    return quote + body + quote


def _format_str(text: str, where: str) -> str:
    if text == _MISSING:
        raise ValueError(
            f"cannot pass the string '???'{where}: OmegaConf reads it as a missing "
            "mandatory value, so the task would never receive it"
        )
    if "\x00" in text:
        raise ValueError(
            f"cannot pass a string containing NUL ('\\x00'){where}: no command line, "
            "environment or YAML file written by Hydra can carry it"
        )
    if LONE_SURROGATE.search(text):
        raise ValueError(
            f"cannot pass a string containing a lone surrogate{where}: Hydra writes "
            "overrides as UTF-8 (.hydra/overrides.yaml), which cannot encode it"
        )
    # every ``${`` escaped, so that OmegaConf reads the text back literally
    return _quote(_INTERPOLATION_RE.sub(lambda m: "\\" * (2 * len(m.group(1)) + 1) + "${", text))


def _format_dict_key(key: object, where: str) -> str:
    if not isinstance(key, str):
        raise TypeError(
            f"dictionary keys must be str, got {type(key).__qualname__} ({key!r}){where}; "
            "Hydra's override grammar would not keep its type"
        )
    if _DICT_KEY_RE.fullmatch(key) is None or key.lower() in _RESERVED_DICT_KEYS:
        raise ValueError(
            f"invalid dictionary key {key!r}{where}: keys must be identifiers "
            "([A-Za-z_][A-Za-z0-9_-]*) other than null/true/false/inf/nan, because "
            "Hydra's grammar has no quoted keys"
        )
    return key


def _format(value: object, path: str, active: set[int]) -> str:
    where = f" at {path}" if path else ""
    if value is None:
        return "null"
    if isinstance(value, Enum):
        raise TypeError(
            f"cannot format an enum member ({type(value).__qualname__}){where} as a Hydra "
            "override; pass its .name or .value instead"
        )
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        # repr: the shortest text that round-trips; Hydra's FLOAT token takes every form
        # ("0.1", "-0.0", "1e+300", "5e-324", "nan", "-inf")
        return float.__repr__(value)
    if isinstance(value, Interpolation):
        return _quote(str.__str__(value))
    if isinstance(value, str):
        return _format_str(str.__str__(value), where)
    if is_array_scalar(value):
        return _format(value.item(), path, active)  # type: ignore[attr-defined]
    if isinstance(value, Mapping | Sequence) and not isinstance(value, bytes | bytearray):
        if id(value) in active:
            raise ValueError(f"cannot format a self-referencing container{where}")
        active.add(id(value))
        try:
            if isinstance(value, Mapping):
                items = (
                    f"{_format_dict_key(k, where)}:{_format(v, f'{path}[{k!r}]', active)}"
                    for k, v in value.items()
                )
                return "{" + ",".join(items) + "}"
            items = (_format(v, f"{path}[{i}]", active) for i, v in enumerate(value))
            return "[" + ",".join(items) + "]"
        finally:
            active.discard(id(value))
    hint = "convert it first (e.g. str(path), list(array), .tolist(), sorted(a_set))"
    raise TypeError(
        f"cannot format a value of type {type(value).__qualname__}{where} as a Hydra "
        "override: supported are None, bool, int, float, str, numpy-like scalars, and "
        f"lists/tuples/dicts of those; {hint}"
    )


def format_value(value: object) -> str:
    """Format ``value`` as a Hydra override value that parses back to exactly ``value``
    (tuples as lists: OmegaConf has none).

    >>> format_value([None, True, 3, 0.1, float("-inf"), "it's, ${x}"])
    '[null,true,3,0.1,-inf,"it\\'s, \\\\${x}"]'
    >>> format_value({"lr": 1e-3, "name": "a=b"})
    "{lr:0.001,name:'a=b'}"
    """
    return _format(value, "", set())


def _check_key(key: object) -> str:
    if not isinstance(key, str):
        raise TypeError(f"override keys must be str, got {type(key).__qualname__}")
    if _KEY_RE.fullmatch(key) is None:
        hint = ""
        if key[:1] in ("+", "~"):
            hint = " (use add=True / force_add=True instead of a '+' prefix)"
        raise ValueError(
            f"invalid override key {key!r}{hint}: expected a dotted config path of "
            "identifiers ([A-Za-z_][A-Za-z0-9_-]*, list indices allowed after the first "
            "segment), e.g. 'model.lr' or 'layers.0.size', or a config group path such "
            "as 'hydra/launcher'"
        )
    return key


def _prefix(add: bool, force_add: bool) -> str:
    if add and force_add:
        raise ValueError("pass at most one of add=True ('+key') and force_add=True ('++key')")
    return "++" if force_add else "+" if add else ""


def format_override(key: str, value: object, *, add: bool = False, force_add: bool = False) -> str:
    """Format a single ``key=value`` override: ``key`` a dotted config path or a config
    group, without its ``+`` prefix (``add``: ``+key``, ``force_add``: ``++key``).

    >>> format_override("hydra.sweep.dir", "/tmp/my runs")
    "hydra.sweep.dir='/tmp/my runs'"
    >>> format_override("seed", 0, add=True)
    '+seed=0'
    """
    return f"{_prefix(add, force_add)}{_check_key(key)}={format_value(value)}"


def format_sweep(
    key: str, values: Sequence[object], *, add: bool = False, force_add: bool = False
) -> str:
    """Format a sweep of ``key`` over ``values`` (one multirun job per value), as for
    :func:`format_override`.

    Two or more values are written ``key=v1,v2``: ``choice(...)`` would strip the quotes of
    its strings (``choice('1')`` gives ``1``) and refuse ``null``. One value is
    ``key=choice(v)``, but a string or ``None`` is the plain ``key=v`` (in a multirun the same
    single job). :func:`parse_sweep_values` reads every form back as the list.

    >>> format_sweep("s", ["a,b", None, 1.5], add=True)
    "+s='a,b',null,1.5"
    >>> format_sweep("layers", [[64, 64]])
    'layers=choice([64,64])'
    >>> parse_sweep_values(format_sweep("s", ["1"]).partition("=")[2])
    ['1']
    """
    prefix = _prefix(add, force_add)
    _check_key(key)
    if isinstance(values, str | bytes | bytearray) or not isinstance(values, Sequence):
        raise TypeError(
            f"values must be a sequence (list/tuple) of sweep values, got "
            f"{type(values).__qualname__} (convert arrays with .tolist(), sets with sorted())"
        )
    formatted = check_sweep_values(key, values)
    text = ",".join(formatted)
    if len(formatted) == 1 and text != "null" and text[0] not in "'\"":
        text = f"choice({text})"
    return f"{prefix}{key}={text}"


def check_sweep_values(key: str, values: Sequence[object]) -> list[str]:
    """The sweep's values as formatted by :func:`format_value`; refused when empty or when two
    format identically (one cell): ``1`` and ``1.0`` are distinct, as ``True`` and ``1``.

    >>> check_sweep_values("s", [1, 1.0, "1"])
    ['1', '1.0', "'1'"]
    >>> check_sweep_values("s", ["a", "a"])
    Traceback (most recent call last):
    ...
    ValueError: duplicate values in the sweep over 's': 'a' (2x); duplicates would ...
    """
    if len(values) == 0:
        raise ValueError(f"cannot sweep {key!r} over no values")
    formatted = [format_value(value) for value in values]
    counts = Counter(formatted)
    duplicates = [f"{values[formatted.index(t)]!r} ({n}x)" for t, n in counts.items() if n > 1]
    if duplicates:
        raise ValueError(
            f"duplicate values in the sweep over {key!r}: {', '.join(duplicates)}; "
            "duplicates would collapse into the same sweep cell"
        )
    return formatted


def _unescape_interpolations(text: str, keep_interpolations: bool) -> str:
    if "${" not in text:
        return text
    if any(len(m.group(1)) % 2 == 0 for m in _INTERPOLATION_RE.finditer(text)):
        if keep_interpolations:
            return text
        raise ValueError(
            f"{text!r} contains an OmegaConf interpolation, whose value depends on the "
            "config; pass keep_interpolations=True to get its raw text"
        )
    return _INTERPOLATION_RE.sub(lambda m: "\\" * (len(m.group(1)) // 2) + "${", text)


def _to_python(value: object, keep_interpolations: bool) -> Any:
    from hydra.core.override_parser.types import QuotedString

    if isinstance(value, QuotedString):
        value = value.text
    if isinstance(value, str):
        return _unescape_interpolations(value, keep_interpolations)
    if isinstance(value, list):
        return [_to_python(item, keep_interpolations) for item in value]
    if isinstance(value, dict):
        return {
            _to_python(k, keep_interpolations): _to_python(v, keep_interpolations)
            for k, v in value.items()
        }
    return value


def _parse_value(text: str, keep_interpolations: bool, as_list: bool) -> Any:
    from hydra.errors import HydraException

    if not isinstance(text, str):
        raise TypeError(f"expected the override value as str, got {type(text).__qualname__}")
    try:
        override = parse_overrides([f"_={text}"])[0]
    except HydraException as exc:
        raise ValueError(f"cannot parse override value {text!r}: {exc}") from exc
    if not override.is_sweep_override():
        value = _to_python(override.value(), keep_interpolations)
        return [value] if as_list else value
    if not override.is_discrete_sweep():
        raise ValueError(f"{text!r} is a {override.value_type.name} sweep, not a list of values")
    return [_to_python(v, keep_interpolations) for v in override.sweep_iterator()]


def parse_override_value(text: str, *, keep_interpolations: bool = False) -> Any:
    """The value the task receives for an override's value text (Hydra's parser: the inverse
    of :func:`format_value`); for a discrete sweep the list of its values. A live
    interpolation is a ``ValueError``, or with ``keep_interpolations`` kept as OmegaConf
    stores it.

    >>> parse_override_value("'a,b',null,1.5")
    ['a,b', None, 1.5]
    >>> parse_override_value(format_value({"x": "${y}"}))
    {'x': '${y}'}
    """
    return _parse_value(text, keep_interpolations, as_list=False)


def parse_sweep_values(text: str, *, keep_interpolations: bool = False) -> list[Any]:
    """:func:`parse_override_value`, but a plain value ``v`` gives ``[v]``: one element per
    job, so every output of :func:`format_sweep` reads back as its input list.

    >>> parse_sweep_values("choice([1,2])")
    [[1, 2]]
    >>> parse_sweep_values("'solo'")
    ['solo']
    """
    return _parse_value(text, keep_interpolations, as_list=True)
