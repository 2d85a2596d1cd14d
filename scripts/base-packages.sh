#!/usr/bin/env bash
# The Python packages a base image has installed, as docker/ngc-base.txt keeps them:
#   scripts/base-packages.sh nvcr.io/nvidia/tensorflow:25.02-tf2-py3 > docker/ngc-base.txt
# then `make lock`. pip, setuptools and wheel are pip's own tools, left to the image.
set -euo pipefail
image="${1:?usage: base-packages.sh IMAGE}"
sed -n '1,5p' "$(dirname "$0")/../docker/ngc-base.txt"  # what the file is
printf '#\n# Written from %s.\n' "$image"
docker run --rm --entrypoint python3 "$image" -m pip list --format=freeze --disable-pip-version-check \
    | grep -viE '^(pip|setuptools|wheel)==' | sort -f
