#!/usr/bin/env bash
# The images' hashed locks, written by `make lock` after requirements.lock:
#   docker/ngc.lock     what docker/Dockerfile adds to NVIDIA's TensorFlow image: pyproject.toml's
#                       dependencies resolved with the base's own packages (docker/ngc-base.txt)
#                       as constraints, and those left out, so that nothing of NVIDIA's is replaced
#   docker/cuda.lock    what docker/cuda.Dockerfile adds to requirements.lock: the CUDA, cuDNN and
#                       NCCL wheels of tensorflow[and-cuda], at requirements.lock's TensorFlow
#   docker/mlflow.lock  the MLflow server image's packages (docker/mlflow.in)
# Each for every Python from 3.11 (NVIDIA's images have 3.12), with sha256 hashes.
set -euo pipefail
uv="${1:?usage: container-locks.sh UV}"
cd "$(dirname "$0")/.."
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
names() { sed -nE 's/^([A-Za-z0-9._-]+)==.*/\1/p' "$1"; }
leave_out() { names "$1" | sed 's/^/--no-emit-package=/'; }
compile() {
    "$uv" pip compile --universal --generate-hashes --python-version 3.11 --quiet \
        --custom-compile-command "make lock" "$@"
}
# NVIDIA's own builds carry a local version (tensorflow 2.17.0+nv25.2): PyPI's release of the
# same version stands for it while resolving.
sed -E 's/\+[A-Za-z0-9.]+$//' docker/ngc-base.txt > "$tmp/ngc-base.txt"
# shellcheck disable=SC2046  # one option per package name
compile pyproject.toml --extra postgres --extra gpu --constraint "$tmp/ngc-base.txt" $(leave_out docker/ngc-base.txt) \
    --output-file docker/ngc.lock
echo "tensorflow[and-cuda]" > "$tmp/cuda.in"
# shellcheck disable=SC2046
compile "$tmp/cuda.in" --constraint requirements.lock $(leave_out requirements.lock) \
    --output-file docker/cuda.lock
compile docker/mlflow.in --output-file docker/mlflow.lock
