# SPDX-License-Identifier: MIT
# Sourced (never run) by scripts/lock, scripts/lock-image and scripts/upgrade-check: the
# pinned uv, a caller's environment that cannot steer a resolution, and the requirements
# of the test install read from pyproject.toml.
#
#   lock_uv TAG    sets $uv to a uv of the pinned version: MUSHIN_UV (an existing binary,
#                  refused unless it is that version), else one installed once into its own
#                  cache venv (${XDG_CACHE_HOME:-~/.cache}/mushin-box/uv-VERSION), never into
#                  the project. TAG prefixes its messages.
#   torch_links ROOT DIR
#                  makes DIR a find-links directory whose only file is the CPU torch wheel
#                  ci/constraints.txt pins, read from MUSHIN_TORCH_WHEEL (default: this
#                  machine kind's copy in /opt/wheels; scripts/lock says where it comes from)
#   test_requirements ROOT [floor|wide]
#                  prints pyproject.toml's runtime requirements and those of its test extra,
#                  the extras that one names through the self-reference mushin-box[...]
#                  unfolded (uv's lowest-direct lowers only direct requirements, and counts
#                  none reached through a self-reference as direct); `floor`: each at exactly
#                  its lower bound; `wide`: every upper bound dropped.
#
# The same lock on any machine needs the same resolver: uv is pinned (MUSHIN_UV_VERSION, to
# change on purpose), and the UV_* variables that change what it resolves (UV_INDEX_URL,
# UV_EXCLUDE_NEWER, UV_RESOLUTION, UV_OVERRIDE...) are unset here. Callers pass --no-config
# too, so no uv.toml or pyproject [tool.uv] of the user's does either. uv is a development
# tool, not a dependency of mushin-box.

uv_version=${MUSHIN_UV_VERSION:-0.13.9}

lock_uv() {
    local tag=$1 venv have
    uv=${MUSHIN_UV:-}
    if [[ -z "$uv" ]]; then
        venv="${XDG_CACHE_HOME:-$HOME/.cache}/mushin-box/uv-$uv_version"
        uv="$venv/bin/uv"
        if [[ ! -x "$uv" ]]; then
            echo "[$tag] installing uv $uv_version into $venv" >&2
            "${PYTHON:-python3}" -m venv "$venv"
            "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
                "uv==$uv_version" >&2
        fi
    fi
    have=$("$uv" --version | awk '{print $2}')
    if [[ "$have" != "$uv_version" ]]; then
        echo "[$tag] $uv is uv $have, this lock is made with uv $uv_version" \
            "(set MUSHIN_UV_VERSION to change it on purpose)" >&2
        return 2
    fi
}

torch_links() {
    local pin wheel
    pin=$(sed -n 's/^torch==//p' "$1/ci/constraints.txt")
    wheel=${MUSHIN_TORCH_WHEEL:-/opt/wheels/torch-$pin-cp311-cp311-manylinux_2_28_x86_64.whl}
    if [[ ! -f "$wheel" ]]; then
        echo "no torch $pin CPU wheel at $wheel: download it (see scripts/lock's header)" \
            "and set MUSHIN_TORCH_WHEEL" >&2
        return 2
    fi
    mkdir -p "$2"
    ln -sf "$wheel" "$2/"
}

test_requirements() {
    "${PYTHON:-python3}" - "$1/pyproject.toml" "${2:-}" <<'PY'
import re, sys, tomllib

project = tomllib.load(open(sys.argv[1], "rb"))["project"]
out = list(project["dependencies"])


def unfold(extra):
    for req in project["optional-dependencies"][extra]:
        inner = re.fullmatch(r"mushin-box\[(.*)\]", req)
        if inner:
            for name in inner.group(1).split(","):
                unfold(name)
        else:
            out.append(req)


unfold("test")
if sys.argv[2] == "floor":
    out = [re.sub(r"^([\w.\[\]-]+)>=([^,;\s]+).*", r"\1==\2", r) for r in out]
elif sys.argv[2] == "wide":
    out = [re.sub(r",?<[^,;]*", "", r) for r in out]
print("\n".join(dict.fromkeys(out)))
PY
}

# the cache, TLS and timeout settings change where and how files are fetched, not what is
# resolved: they stay
while read -r name; do
    case "$name" in
        UV_CACHE_DIR | UV_NATIVE_TLS | UV_HTTP_TIMEOUT) ;;
        UV_*) unset "$name" ;;
    esac
done < <(compgen -e)
