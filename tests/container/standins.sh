#!/usr/bin/env bash
# Stand-in base images, made from Debian's packages (NVIDIA's and Docker Hub's images cannot
# be pulled here): pipeline-standin/debian, pipeline-standin/tensorflow:25.02-tf2-py3 and
# pipeline-standin/postgres:15. Made once per machine: the three images are saved in CACHE_DIR
# under the hash of their recipe (this script, the stand-ins' Dockerfiles and entrypoints, the
# Debian packages and the host's CA bundle), and a later run with the same recipe only loads
# them (or finds them in an engine that kept them: kept.sh); a change to any part of it makes
# them again (and drops the old save). Builds use the host network (the engine has no NAT),
# and the host's CA bundle goes into the base, so that pip in the builds trusts what the host
# trusts (a TLS-inspecting proxy's CA, for one).
set -euo pipefail
cache="${1:?usage: standins.sh CACHE_DIR}"
here="$(cd "$(dirname "$0")" && pwd)"
packages=python3,python3-venv,python3-pip,ca-certificates,git,postgresql
ca=/etc/ssl/certs/ca-certificates.crt
images=(pipeline-standin/debian:bookworm pipeline-standin/tensorflow:25.02-tf2-py3 pipeline-standin/postgres:15)
listed="$here/../../docker/ngc-base.txt"  # what the TensorFlow stand-in installs
recipe="$(cat <(echo "$packages") "$ca" "$here/standins.sh" "$here"/standin-* "$listed" | sha256sum | cut -c1-16)"
saved="$cache/standins-$recipe.tar"
mkdir -p "$cache"
source "$here/kept.sh"
if kept_has standins "$recipe" "${images[@]}"; then
    exit 0
elif [ -s "$saved" ]; then
    docker load -q -i "$saved" >/dev/null
    kept_mark standins "$recipe" "${images[0]}"
    exit 0
fi
tarball="$cache/debian-bookworm-$(cat <(echo "$packages") "$ca" | md5sum | cut -c1-8).tar"
if [ ! -s "$tarball" ]; then
    rootfs="$cache/rootfs.$$"
    debootstrap --variant=minbase --include="$packages" bookworm "$rootfs" >/dev/null
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
        "$rootfs"/usr/share/doc "$rootfs"/usr/share/man "$rootfs"/usr/share/locale
    cp "$ca" "$rootfs$ca"
    tar -C "$rootfs" -cf "$tarball.part" . && mv "$tarball.part" "$tarball"
    rm -rf "$rootfs"
fi
docker import -c 'CMD ["/bin/bash"]' -c "ENV PIP_CERT=$ca" "$tarball" "${images[0]}" >/dev/null
context="$cache/context.$$"
mkdir -p "$context" && cp "$here"/standin-* "$listed" "$context/"
docker build -q --network host -t "${images[1]}" -f "$context/standin-tensorflow.Dockerfile" "$context" >/dev/null
rm -rf "$context"
docker build -q --network host -t "${images[2]}" -f "$here/standin-postgres.Dockerfile" "$here" >/dev/null
docker save -o "$saved.part" "${images[@]}"
mv "$saved.part" "$saved"
# an older recipe's save is of no more use (the debootstrap tree stays: it has its own key)
find "$cache" -maxdepth 1 -name 'standins-*.tar' ! -name "standins-$recipe.tar" -delete
kept_mark standins "$recipe" "${images[0]}"
