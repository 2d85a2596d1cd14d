#!/usr/bin/env bash
# Debian packages the test suite needs beyond Python: Chromium, for the MLflow UI test;
# Slurm with munge and iproute2, for the two-node Slurm cluster the tests start (deploy/cluster); a Docker
# engine, Compose and debootstrap, for the container tests (which start the engine); and
# PostgreSQL, for a tuning study's storage (the tests start a server of their own).
# Installs what is missing with apt-get (as root, or through sudo).
set -euo pipefail
need=()
[ -x "${PIPELINE_CHROMIUM:-/usr/bin/chromium}" ] || need+=(chromium)
command -v git >/dev/null 2>&1 || need+=(git)
command -v slurmctld >/dev/null 2>&1 || need+=(slurm-wlm)
command -v munged >/dev/null 2>&1 || need+=(munge)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || need+=(postgresql)
[ ${#need[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
    echo "error: missing ${need[*]}; install them, or set PIPELINE_CHROMIUM to a Chromium binary" >&2
    exit 2
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing Debian packages: ${need[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
