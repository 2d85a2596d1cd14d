#!/usr/bin/env bash
# The Python packages a base image has installed, as docker/ngc-base.txt keeps them:
#   scripts/base-packages.sh nvcr.io/nvidia/tensorflow:25.02-tf2-py3 > docker/ngc-base.txt
# then `make lock`. pip, setuptools and wheel are pip's own tools, left to the image.
#
#   scripts/base-packages.sh --pin IMAGE
# writes docker/ngc-base.txt and docker/ngc.lock from IMAGE, an image docker/Dockerfile built
# (the base's list and the lock that build installed, /opt/pipeline/ in the image), both or
# neither: after it, a build on the same base is strict (it installs that lock as committed).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ "${1:-}" = "--pin" ]; then
    image="${2:?usage: base-packages.sh --pin IMAGE}"
    tmp="$(mktemp -d "$root/docker/.pin.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    for name in ngc-base.txt ngc.lock; do
        if ! docker run --rm --network none --entrypoint cat "$image" "/opt/pipeline/$name" > "$tmp/$name" 2>"$tmp/err" \
                || ! [ -s "$tmp/$name" ]; then
            echo "error: cannot read /opt/pipeline/$name in the image $image: $(tail -1 "$tmp/err")" >&2
            exit 1
        fi
    done
    chmod 0644 "$tmp/ngc-base.txt" "$tmp/ngc.lock"
    mv "$tmp/ngc-base.txt" "$root/docker/ngc-base.txt"
    mv "$tmp/ngc.lock" "$root/docker/ngc.lock"
    echo "docker/ngc-base.txt and docker/ngc.lock written from $image"
    exit 0
fi
image="${1:?usage: base-packages.sh IMAGE | base-packages.sh --pin IMAGE}"
sed -n '1,5p' "$root/docker/ngc-base.txt"  # what the file is
printf '#\n# Written from %s.\n' "$image"
docker run --rm --entrypoint python3 "$image" -m pip list --format=freeze --disable-pip-version-check \
    | grep -viE '^(pip|setuptools|wheel)==' | sort -f
