# SPDX-License-Identifier: MIT
"""`mushin-box build` of the tests' image (containers/test-image.py, the native builder).

    python scripts/bench/image_build.py hit REPEAT     # an up-to-date image kept: whole processes
    python scripts/bench/image_build.py cold           # a cold build, then `build --check` of it

Prints one JSON object: ``hit`` (seconds of ``mushin-box build`` when the output already
holds an image of the same recipe), or ``build`` and ``check`` (seconds of a build into an
empty directory, and of ``--check`` of what it built, which rebuilds it).

For ``hit`` the image in place is a stand-in file with the manifest a build writes (its
``recipe_sha256`` and ``sif_size``): the up-to-date check reads only those, so it costs what
it costs beside a real image, without the minutes of a build. ``cold`` needs what a native
build needs (mmdebstrap, the Debian mirror, the pip indexes).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPO))

from mushin_box._image.build import Manifest, manifest_path, native_recipe  # noqa: E402
from mushin_box.cli.build import load_spec  # noqa: E402

SPEC = "containers/test-image.py"
BUILD = [sys.executable, "-m", "mushin_box", "build", SPEC, "--backend", "native"]


def _timed(argv: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr[-2000:]}")
    return seconds


def hit(repeat: int, where: Path) -> dict[str, list[float]]:
    recipe = native_recipe(load_spec(str(REPO / SPEC))[0], REPO, str(REPO / SPEC))[0]
    image = where / "image.sif"
    image.write_bytes(b"a stand-in for the image")
    manifest = Manifest(
        image=image.name, definition="image.def", definition_sha256="0" * 64, base_image="-",
        base_digest=None, build_argv=(), mushin_box_version="-", sif_sha256="0" * 64,
        sif_size=image.stat().st_size, backend="native", recipe_sha256=recipe,
    )  # fmt: skip
    manifest_path(image).write_text(json.dumps(manifest.to_dict()))
    return {"hit": [_timed([*BUILD, "-o", str(image)]) for _ in range(repeat)]}


def cold(where: Path) -> dict[str, list[float]]:
    image = where / "image.sif"
    build = _timed([*BUILD, "-o", str(image)])
    check = _timed([*BUILD, "--check", str(image)])
    return {"build": [build], "check": [check]}


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="mushin-bench-build-", dir="/var/tmp") as tmp:
        got = hit(int(argv[1]), Path(tmp)) if argv[0] == "hit" else cold(Path(tmp))
    print(json.dumps(got))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
