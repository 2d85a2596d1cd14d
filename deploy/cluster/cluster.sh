#!/usr/bin/env bash
# A two-node Slurm cluster on this machine, to try the multi-node path before a real cluster
# (docs/multi-node.md): slurmctld, and two slurmd hosts `node1` and `node2`, each in network,
# hostname and mount namespaces of its own (its own IP address, hostname, /etc/hosts and
# ports, on a bridge), sharing this machine's file system as a cluster shares its network file
# system; beside them PostgreSQL (for tuning studies) and an MLflow tracking server, on the
# bridge's address.
#   deploy/cluster/up.sh [DIR]          # start; DIR holds the state (default /var/tmp/pipeline-cluster)
#   source DIR/cluster.env              # SLURM_CONF, MLFLOW_TRACKING_URI, PIPELINE_TUNE_STORAGE
#   deploy/cluster/node.sh stop node2   # node2 lost: every process of it killed, as a power cut
#   deploy/cluster/node.sh start node2  # back: its slurmd started again
#   deploy/cluster/down.sh [DIR]        # stop everything, remove the bridge and namespaces
# node.sh and down.sh find the folder without DIR: PIPELINE_CLUSTER_DIR (cluster.env exports it),
# else the cluster up on this machine (/run/pipeline-cluster/dir).
# Needs root, iproute2, Debian's slurm-wlm, munge and postgresql (scripts/system-deps.sh), and
# the project's .venv (make setup) for the MLflow server. PIPELINE_CLUSTER_NET (default
# 10.213.7) is the /24 the bridge and the nodes take; PIPELINE_CLUSTER_MLFLOW_PORT (5050) and
# PIPELINE_CLUSTER_PG_PORT (5432) the servers' ports on the bridge's address.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
project="$(cd "$here/../.." && pwd)"
net="${PIPELINE_CLUSTER_NET:-10.213.7}"
bridge=plcluster0
nodes=(node1 node2)
host_ip="$net.1"
mlflow_port="${PIPELINE_CLUSTER_MLFLOW_PORT:-5050}"
pg_port="${PIPELINE_CLUSTER_PG_PORT:-5432}"
ctld_port="${PIPELINE_CLUSTER_SLURM_PORT:-16917}"

die() {
    echo "error: $*" >&2
    exit 1
}

node_ip() {  # node1 -> NET.11
    echo "$net.$((10 + ${1#node}))"
}

netns_of() {
    echo "pipeline-$1"
}

# this host's one cluster (one bridge): the path of its folder, and the pids of its daemons, which
# down.sh reads even when the folder is gone
run_dir="${PIPELINE_CLUSTER_RUN:-/run/pipeline-cluster}"

state_dir() {  # DIR given; else PIPELINE_CLUSTER_DIR (cluster.env sets it); else the cluster up here; else the default
    if [ -n "${1:-}" ]; then
        realpath -m "$1"
    elif [ -n "${PIPELINE_CLUSTER_DIR:-}" ]; then
        realpath -m "$PIPELINE_CLUSTER_DIR"
    elif [ -s "$run_dir/dir" ]; then
        cat "$run_dir/dir"
    else
        realpath -m /var/tmp/pipeline-cluster
    fi
}

# slurmd of NODE in that node's namespaces: its hostname, its /etc/hosts, its network.
start_slurmd() {
    local dir=$1 node=$2
    mkdir -p "$dir/$node/spool"
    # nsenter, not `ip netns exec`, which mounts a /sys of its own without the cgroup file
    # system slurmd needs
    unshare --uts --mount --propagation private nsenter --net="/run/netns/$(netns_of "$node")" \
        sh -c "hostname $node && mount --bind '$dir/hosts' /etc/hosts && \
               SLURM_CONF='$dir/slurm.conf' exec slurmd -N $node"
}

# every process of NODE killed at once: its slurmd, its job steps and their workers
kill_node() {  # prints the pids it signalled
    local node=$1 pids
    pids=$(ip netns pids "$(netns_of "$node")" 2>/dev/null || true)
    [ -z "$pids" ] || kill -9 $pids 2>/dev/null || true
    echo $pids
}

pid_runs() {  # whether PID is a process, and not a zombie
    [ -r "/proc/$1/stat" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]
}

wait_gone() {  # until none of the pids runs (a zombie is gone), 10 s at most; then SIGKILL
    local pid left
    for _ in $(seq 1 40); do
        left=""
        for pid in "$@"; do
            pid_runs "$pid" && left="$left $pid"
        done
        [ -z "$left" ] && return 0
        sleep 0.25
    done
    kill -9 $left 2>/dev/null || true
}

# whether PID runs and is one of the cluster's daemons, by its command's name: a pid a killed
# run left in a pid file may name another process since (pid_max is 32768 on many hosts)
daemon_alive() {
    pid_runs "$1" || return 1
    case "$(cat "/proc/$1/comm" 2>/dev/null)" in
        slurmctld | slurmd | postgres | mlflow) return 0 ;;
    esac
    return 1
}

# whether the cluster in DIR runs: a daemon it recorded (slurmctld, the MLflow server and
# PostgreSQL by /run/pipeline-cluster when it is the cluster up here, each slurmd and PostgreSQL
# by its folder), or any process in the nodes' namespaces. A cluster whose run was killed
# (SIGKILL, a lost session) leaves its bridge, namespaces and folder, and none.
cluster_running() {
    local dir=$1 pid node
    for pid in $(
        if [ "$(cat "$run_dir/dir" 2>/dev/null)" = "$dir" ]; then cat "$run_dir"/*.pid 2>/dev/null; fi
        cat "$dir"/node*/slurmd.pid 2>/dev/null
        head -1 "$dir/postgres/data/postmaster.pid" 2>/dev/null
    ); do
        daemon_alive "$pid" && return 0
    done
    for node in "${nodes[@]}"; do
        [ -z "$(ip netns pids "$(netns_of "$node")" 2>/dev/null)" ] || return 0
    done
    return 1
}

wait_idle() {  # until sinfo shows N nodes idle
    local want=$1
    for _ in $(seq 1 120); do
        if [ "$(sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)" -ge "$want" ]; then
            return 0
        fi
        sleep 0.5
    done
    return 1
}
