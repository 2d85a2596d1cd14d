#!/usr/bin/env bash
# Stand-in base images, made from Debian's packages (NVIDIA's and Docker Hub's images cannot
# be pulled here): pipeline-standin/debian, pipeline-standin/tensorflow:25.02-tf2-py3 and
# pipeline-standin/postgres:15. The debootstrap tree is kept as a tarball in CACHE_DIR, so a
# second run only imports it. Builds use the host network (the engine has no NAT), and the
# host's CA bundle goes into the base, so that pip in the builds trusts what the host trusts
# (a TLS-inspecting proxy's CA, for one).
set -euo pipefail
cache="${1:?usage: standins.sh CACHE_DIR}"
here="$(cd "$(dirname "$0")" && pwd)"
packages=python3,python3-venv,python3-pip,ca-certificates,git,postgresql
ca=/etc/ssl/certs/ca-certificates.crt
tarball="$cache/debian-bookworm-$(cat <(echo "$packages") "$ca" | md5sum | cut -c1-8).tar"
mkdir -p "$cache"
if [ ! -s "$tarball" ]; then
    rootfs="$cache/rootfs.$$"
    debootstrap --variant=minbase --include="$packages" bookworm "$rootfs" >/dev/null
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
        "$rootfs"/usr/share/doc "$rootfs"/usr/share/man "$rootfs"/usr/share/locale
    cp "$ca" "$rootfs$ca"
    tar -C "$rootfs" -cf "$tarball.part" . && mv "$tarball.part" "$tarball"
    rm -rf "$rootfs"
fi
docker import -c 'CMD ["/bin/bash"]' -c "ENV PIP_CERT=$ca" "$tarball" pipeline-standin/debian:bookworm >/dev/null
docker build -q --network host -t pipeline-standin/tensorflow:25.02-tf2-py3 \
    -f "$here/standin-tensorflow.Dockerfile" "$here" >/dev/null
docker build -q --network host -t pipeline-standin/postgres:15 \
    -f "$here/standin-postgres.Dockerfile" "$here" >/dev/null
