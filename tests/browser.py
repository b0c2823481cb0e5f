# SPDX-License-Identifier: MIT
"""Headless Chromium for the report tests: open a page (its DOM, or a screenshot), record
the requests the page itself made, read the rendered report back, and decode a screenshot's
pixels (no imaging library needed)."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    reason = "Chromium is not installed (Debian: apt-get install chromium)"
    if os.environ.get("MUSHIN_REQUIRE_CHROMIUM") == "1":
        pytest.fail(f"{reason}; MUSHIN_REQUIRE_CHROMIUM=1 requires it", pytrace=False)
    pytest.skip(f"{reason}; set MUSHIN_REQUIRE_CHROMIUM=1 to fail instead")


def browse(page: Path, work: Path, *mode: str) -> tuple[str, list[str]]:
    """Open ``page`` in headless Chromium; (stdout, URLs the page itself requested).

    Chromium's own background requests (updates, time) are left out: a page's request
    carries the page's origin (``file://``) in its network isolation key.
    """
    netlog = work / f"netlog-{page.stem}-{len(mode)}.json"
    profile = work / "profile"
    command = [
        chromium(),
        "--headless",
        "--no-sandbox",  # root in CI containers
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        f"--user-data-dir={profile}",
        f"--log-net-log={netlog}",
        "--hide-scrollbars",
        *mode,
        page.resolve().as_uri(),
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    log = json.loads(netlog.read_text())
    names = {v: k for k, v in log["constants"]["logEventTypes"].items()}
    requested = [
        e["params"]["url"]
        for e in log["events"]
        if names.get(e["type"]) == "URL_REQUEST_START_JOB"
        and "file://" in str(e.get("params", {}).get("network_isolation_key", ""))
    ]
    return proc.stdout, requested


class ReportPage(HTMLParser):
    """The curves (per plot, on the axis it opens with: a plot with a log toggle holds
    both) and the table rows of a rendered report; every curve's attributes too."""

    def __init__(self) -> None:
        super().__init__()
        self.plots: dict[str, list[tuple[str, str]]] = {}
        self.paths: dict[str, list[dict[str, Any]]] = {}
        self.scales: dict[str, str] = {}
        self.toggles: dict[str, bool] = {}
        self.rows: list[tuple[str, list[str]]] = []
        self._metric: str | None = None
        self._shown = False
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a: dict[str, Any] = dict(attrs)
        if tag == "figure" and "plot" in (a.get("class") or "").split():
            self._metric = a["data-metric"]
            self.scales[a["data-metric"]] = a["data-scale"]
            self.plots[a["data-metric"]] = []
            self.paths[a["data-metric"]] = []
        elif tag == "input" and self._metric and a.get("class") == "logy":
            self.toggles[self._metric] = "checked" in a
        elif tag == "svg" and self._metric:
            self._shown = a.get("data-scale") == self.scales[self._metric]
        elif tag == "path" and self._metric and self._shown and "curve" in a.get("class", ""):
            self.paths[self._metric].append(a)
            if a.get("class") == "curve":
                self.plots[self._metric].append((a["data-cell"], a.get("d") or ""))
        elif tag == "tr" and "cell" in (a.get("class") or "").split():
            self._row = []
            self.rows.append((a["class"], self._row))
        elif tag == "td" and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "figure":
            self._metric = None
        elif tag == "td" and self._row is not None and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr":
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB bytes) of an 8-bit RGB or RGBA, non-interlaced PNG (what
    Chromium's screenshots are)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at, idat, header = 8, b"", b""
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
    step = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(idat), width * step
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        _unfilter(kind, line, previous, step)
        rows.append(bytes(b for x in range(0, stride, step) for b in line[x : x + 3]))
        previous = line
    return width, height, rows


def _unfilter(kind: int, line: bytearray, up: bytearray, step: int) -> None:
    if kind == 1:
        for i in range(step, len(line)):
            line[i] = (line[i] + line[i - step]) & 255
    elif kind == 2:
        for i in range(len(line)):
            line[i] = (line[i] + up[i]) & 255
    elif kind == 3:
        for i in range(len(line)):
            left = line[i - step] if i >= step else 0
            line[i] = (line[i] + (left + up[i]) // 2) & 255
    elif kind == 4:
        for i in range(len(line)):
            a = line[i - step] if i >= step else 0
            b, c = up[i], up[i - step] if i >= step else 0
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
