#!/usr/bin/env bash
# Stop the two-node Slurm cluster and remove its bridge, namespaces and state:
#   deploy/cluster/down.sh [DIR]     # without DIR: the cluster up on this machine (cluster.sh: state_dir)
set -euo pipefail
# shellcheck source=deploy/cluster/cluster.sh
source "$(dirname "$0")/cluster.sh"
dir=$(state_dir "${1:-}")

signalled=()
for node in "${nodes[@]}"; do
    # shellcheck disable=SC2207
    signalled+=($(kill_node "$node"))
    ip netns del "$(netns_of "$node")" 2>/dev/null || true
    ip link del "pl-$node" 2>/dev/null || true
done
# a daemon by the pid up.sh kept beside the folder (/run/pipeline-cluster): found even when the
# folder is gone; signalled only while that pid is still the daemon's, not a process that took
# a dead daemon's pid
signal_recorded() {  # NAME SIGNAL
    local pid
    pid=$(cat "$run_dir/$1.pid" 2>/dev/null || true)
    if [ -n "$pid" ] && daemon_alive "$pid"; then
        kill "-$2" "$pid" 2>/dev/null || true
        signalled+=("$pid")
    fi
}
signal_recorded slurmctld TERM
signal_recorded mlflow TERM
if [ -d "$dir/postgres/data" ]; then
    pg_bin=$(find /usr/lib/postgresql -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -1)
    runuser -u postgres -- "$pg_bin/pg_ctl" -D "$dir/postgres/data" -m immediate stop >/dev/null 2>&1 || true
else
    signal_recorded postgres QUIT  # PostgreSQL's immediate shutdown
fi
# gone before down.sh returns: a daemon saving its state on SIGTERM takes a while on a busy host
wait_gone "${signalled[@]}"
iptables -D FORWARD -i "$bridge" -o "$bridge" -j ACCEPT 2>/dev/null || true
ip link del "$bridge" 2>/dev/null || true
rm -rf "$dir"
# what says a cluster is up here, only when it is this one's
if [ "$(cat "$run_dir/dir" 2>/dev/null)" = "$dir" ] || [ ! -s "$run_dir/dir" ]; then
    rm -rf "$run_dir"
fi
