#!/usr/bin/env bash
# Stop the two-node Slurm cluster and remove its bridge, namespaces and state:
#   deploy/cluster/down.sh [DIR]
set -euo pipefail
# shellcheck source=deploy/cluster/cluster.sh
source "$(dirname "$0")/cluster.sh"
dir=$(state_dir "${1:-}")

for node in "${nodes[@]}"; do
    kill_node "$node"
    ip netns del "$(netns_of "$node")" 2>/dev/null || true
    ip link del "pl-$node" 2>/dev/null || true
done
for pidfile in "$dir/slurmctld.pid" "$dir/mlflow.pid"; do
    [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true
done
if [ -d "$dir/postgres/data" ]; then
    pg_bin=$(find /usr/lib/postgresql -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -1)
    runuser -u postgres -- "$pg_bin/pg_ctl" -D "$dir/postgres/data" -m immediate stop >/dev/null 2>&1 || true
fi
iptables -D FORWARD -i "$bridge" -o "$bridge" -j ACCEPT 2>/dev/null || true
ip link del "$bridge" 2>/dev/null || true
rm -rf "$dir"
