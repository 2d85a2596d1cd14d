#!/usr/bin/env bash
# One node of the two-node cluster lost, or back:
#   deploy/cluster/node.sh stop NODE [DIR]    # every process of NODE killed at once (slurmd, job steps, workers)
#   deploy/cluster/node.sh start NODE [DIR]   # its slurmd started again; Slurm returns it to service
# Without DIR, the cluster's folder is PIPELINE_CLUSTER_DIR's (cluster.env), else that of the cluster
# up on this machine.
set -euo pipefail
# shellcheck source=deploy/cluster/cluster.sh
source "$(dirname "$0")/cluster.sh"
action=${1:?stop or start}
node=${2:?a node: node1 or node2}
dir=$(state_dir "${3:-}")
[[ " ${nodes[*]} " == *" $node "* ]] || die "$node: not a node of the cluster (${nodes[*]})"
case "$action" in
    stop) wait_gone $(kill_node "$node") ;;
    start)
        [ -e "$dir/slurm.conf" ] || die "$dir: no cluster there (give the folder up.sh was given, or source its cluster.env)"
        start_slurmd "$dir" "$node"
        ;;
    *) die "$action: expected stop or start" ;;
esac
