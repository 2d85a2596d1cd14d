#!/usr/bin/env bash
# The second TensorFlow stand-in, pipeline-standin/tensorflow:py312 (py312-standin.Dockerfile:
# NVIDIA's image where it differs from docker/ngc-base.txt), on the Debian stand-in that
# standins.sh made, with Python 3.12 from PYTHON312 (default pyenv's /root/.pyenv/versions/3.12.1,
# built on Debian bookworm, like the stand-in's rootfs). Made once per machine, as standins.sh's:
# saved in CACHE_DIR under the hash of its recipe (standins.sh, this script, the py312-standin
# files, that Python's version) and loaded (or found in an engine that kept it: kept.sh) while
# the recipe is unchanged.
set -euo pipefail
cache="${1:?usage: py312-standin.sh CACHE_DIR}"
here="$(cd "$(dirname "$0")" && pwd)"
image=pipeline-standin/tensorflow:py312
python312="${PYTHON312:-/root/.pyenv/versions/3.12.1}"
if [ ! -x "$python312/bin/python3.12" ]; then
    echo "error: no Python 3.12 at $python312 for the stand-in $image: set PYTHON312 to a Python 3.12 built on Debian bookworm" >&2
    exit 1
fi
recipe="$(cat <(echo "$python312") <("$python312/bin/python3.12" -VV) "$here/standins.sh" "$here"/py312-standin.* \
    "$here/standin-nvidia-entrypoint.sh" | sha256sum | cut -c1-16)"
saved="$cache/standin-py312-$recipe.tar"
mkdir -p "$cache"
source "$here/kept.sh"
if kept_has py312 "$recipe" "$image"; then
    exit 0
elif [ -s "$saved" ]; then
    docker load -q -i "$saved" >/dev/null
    kept_mark py312 "$recipe" "$image"
    exit 0
fi
context="$cache/context312.$$"
trap 'rm -rf "$context"' EXIT
mkdir -p "$context/python3.12" && cp "$here"/py312-standin.* "$here/standin-nvidia-entrypoint.sh" "$context/"
# that Python without its test suite and its site-packages but pip: ~180 MB
tar -C "$python312" --exclude=./lib/python3.12/test --exclude='./lib/python3.12/site-packages/*' -cf - . \
    | tar -C "$context/python3.12" -xf -
cp -a "$python312/lib/python3.12/site-packages/pip" "$python312"/lib/python3.12/site-packages/pip-*.dist-info \
    "$context/python3.12/lib/python3.12/site-packages/"
docker build -q --network host -t "$image" -f "$context/py312-standin.Dockerfile" "$context" >/dev/null
docker save -o "$saved.part" "$image"
mv "$saved.part" "$saved"
find "$cache" -maxdepth 1 -name 'standin-py312-*.tar' ! -name "standin-py312-$recipe.tar" -delete
kept_mark py312 "$recipe" "$image"
