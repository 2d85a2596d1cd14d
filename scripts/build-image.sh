#!/usr/bin/env bash
# docker/Dockerfile built from this clone, labelled with the digest of the lock it installed:
#   scripts/build-image.sh -t pipeline [other `docker build` options, e.g. --build-arg BASE_IMAGE=...]
# VERSION is `git describe --always --dirty` unless given. The lock is docker/ngc.lock when the
# base's packages are docker/ngc-base.txt's, else the one the build resolved against the base
# (its one line says so); either way the image keeps it at /opt/pipeline/ngc.lock. A label
# cannot come from a build step's output, so a second build, `FROM` the image just built and
# nothing else, adds org.pipeline.lock.sha256 (that lock's sha256) and takes the tags.
set -euo pipefail
cd "$(dirname "$0")/.."
tags=()
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    case "${args[i]}" in
    -t | --tag) tags+=(-t "${args[i + 1]:-}") ;;
    --tag=*) tags+=(-t "${args[i]#--tag=}") ;;
    -t?*) tags+=(-t "${args[i]#-t}") ;;
    esac
done
version="$(git describe --always --dirty 2>/dev/null || echo dev)"
iid="$(mktemp)"
trap 'rm -f "$iid"' EXIT
docker build -f docker/Dockerfile --build-arg VERSION="$version" --iidfile "$iid" "$@" .
image="$(cat "$iid")"
if ! digest="$(docker run --rm --network none --entrypoint sha256sum "$image" /opt/pipeline/ngc.lock)"; then
    echo "error: cannot read /opt/pipeline/ngc.lock in the image just built ($image)" >&2
    exit 1
fi
digest="${digest%% *}"
printf 'FROM %s\n' "$image" | docker build -q --label "org.pipeline.lock.sha256=$digest" "${tags[@]}" - >/dev/null
echo "image labelled org.pipeline.lock.sha256=$digest (/opt/pipeline/ngc.lock)"
