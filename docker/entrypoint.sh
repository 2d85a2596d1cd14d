#!/bin/bash
# Checks what a mounted clone needs before DVC starts (one line and exit 2 when it is not
# there), then hands over to NVIDIA's entrypoint (CUDA compatibility set-up) when the base
# has one.
set -euo pipefail
if [ "${1:-}" = dvc ]; then
    here="$(pwd)"
    if [ ! -f dvc.yaml ]; then
        echo "error: $here has no dvc.yaml: mount your clone there (-v \"\$PWD\":$here)" >&2
        exit 2
    fi
    if ! touch .pipeline-write-check 2>/dev/null; then
        echo "error: $here is not writable by uid $(id -u): mount the clone read-write and run as its owner (--user \"\$(id -u):\$(id -g)\")" >&2
        exit 2
    fi
    rm -f .pipeline-write-check
fi
if [ -x /opt/nvidia/nvidia_entrypoint.sh ]; then
    exec /opt/nvidia/nvidia_entrypoint.sh "$@"
fi
exec "$@"
