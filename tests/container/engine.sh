#!/usr/bin/env bash
# A Docker engine of the tests' own, on a private socket: `engine.sh start DIR [DATA_ROOT]`
# installs Debian's docker.io, docker-compose and debootstrap when missing, starts dockerd with
# its state under DIR (its images, containers and volumes in DATA_ROOT when given: a folder
# that outlives the session, tests/runner/images.py) and prints the DOCKER_HOST to use;
# `engine.sh stop DIR [DATA_ROOT]` stops it.
#
# overlay2 storage where the kernel can mount it on DIR's file system, else vfs (works
# anywhere, but copies every layer whole for every build step); no iptables: containers reach each other on the networks compose creates and the host on
# published 127.0.0.1 ports. Stand-in for the NVIDIA container toolkit: dockerd accepts
# `--gpus` / compose GPU reservations only when `nvidia-container-runtime-hook` is on its
# PATH; here that hook does nothing, so a GPU request reaches the container as NVIDIA's
# variables (NVIDIA_VISIBLE_DEVICES) with no GPU behind it.
set -euo pipefail
cmd="${1:?usage: engine.sh start|stop DIR [DATA_ROOT]}" dir="${2:?usage: engine.sh start|stop DIR [DATA_ROOT]}"
root="${3:-$dir/data}"
sock="$dir/docker.sock"

case "$cmd" in
start)
    need=()
    command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
    command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
    command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
    if [ ${#need[@]} -gt 0 ]; then
        apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            "${need[@]}" >/dev/null
    fi
    mkdir -p "$dir/bin"
    printf '#!/bin/sh\nexit 0\n' > "$dir/bin/nvidia-container-runtime-hook"
    chmod +x "$dir/bin/nvidia-container-runtime-hook"
    driver=vfs
    mkdir -p "$dir/ov/lower" "$dir/ov/upper" "$dir/ov/work" "$dir/ov/merged"
    if mount -t overlay overlay -o "lowerdir=$dir/ov/lower,upperdir=$dir/ov/upper,workdir=$dir/ov/work" \
            "$dir/ov/merged" 2>/dev/null; then
        umount "$dir/ov/merged" && driver=overlay2
    fi
    rm -rf "$dir/ov"
    PATH="$dir/bin:$PATH" setsid dockerd --storage-driver="$driver" --iptables=false \
        --host "unix://$sock" --data-root "$root" --exec-root "$dir/exec" \
        --pidfile "$dir/dockerd.pid" >"$dir/dockerd.log" 2>&1 < /dev/null &
    for _ in $(seq 60); do
        DOCKER_HOST="unix://$sock" docker info >/dev/null 2>&1 && { echo "unix://$sock"; exit 0; }
        sleep 1
    done
    echo "error: dockerd did not start; see $dir/dockerd.log" >&2
    tail -5 "$dir/dockerd.log" >&2
    exit 1
    ;;
stop)
    if [ -f "$dir/dockerd.pid" ]; then
        kill "$(cat "$dir/dockerd.pid")" 2>/dev/null || true
        for _ in $(seq 30); do [ -e "$dir/dockerd.pid" ] || break; sleep 1; done
    fi
    # dockerd leaves its network namespace mounted under its exec root
    findmnt -rn -o TARGET | grep -e "^$dir/" -e "^$root/" | sort -r | xargs -r umount -l
    ;;
*) echo "usage: engine.sh start|stop DIR [DATA_ROOT]" >&2; exit 2 ;;
esac
