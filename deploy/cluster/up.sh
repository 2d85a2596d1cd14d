#!/usr/bin/env bash
# Start the two-node Slurm cluster (deploy/cluster/cluster.sh says what it is):
#   deploy/cluster/up.sh [DIR]
# It checks first that the folder is one the cluster's users can enter, and if it fails midway,
# takes down what it started.
set -euo pipefail
# shellcheck source=deploy/cluster/cluster.sh
source "$(dirname "$0")/cluster.sh"
dir=$(state_dir "${1:-}")

[ "$(id -u)" = 0 ] || die "the cluster's namespaces, bridge and daemons need root"
for tool in ip unshare slurmctld slurmd sinfo munged; do
    command -v "$tool" >/dev/null || die "$tool: not found; install Debian's iproute2, slurm-wlm and munge (scripts/system-deps.sh)"
done
pg_bin=$(find /usr/lib/postgresql -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -1)
[ -n "$pg_bin" ] || die "PostgreSQL: not found; install Debian's postgresql (scripts/system-deps.sh)"
[ -x "$project/.venv/bin/mlflow" ] || die "$project/.venv/bin/mlflow: not found; run make setup first"
# a cluster up here, or in this folder, that no longer runs (its run killed) is taken away first;
# one that runs is left alone
mapfile -t others < <( (cat "$run_dir/dir" 2>/dev/null; [ ! -e "$dir/slurm.conf" ] || echo "$dir") | sort -u)
for other in "${others[@]}"; do
    if cluster_running "$other"; then
        [ "$other" = "$dir" ] && die "$dir: a cluster is up there already (deploy/cluster/down.sh $dir stops it)"
        die "a cluster is up on this machine, in $other (deploy/cluster/down.sh stops it)"
    fi
    echo "up.sh: the cluster in $other no longer runs (none of its daemons is left): taking away what it left" >&2
    PIPELINE_CLUSTER_DIR="" bash "$here/down.sh" "$other" >/dev/null 2>&1
done

# Failing midway takes down what it started (down.sh), or the folder it made; nothing else.
started=0 made=0
on_exit() {
    local status=$?
    [ "$status" = 0 ] && return
    if [ "$started" = 1 ]; then
        echo "up.sh: taking down what it started (deploy/cluster/down.sh $dir)" >&2
        PIPELINE_CLUSTER_DIR="" bash "$here/down.sh" "$dir" >/dev/null 2>&1 || true
    elif [ "$made" = 1 ]; then
        rm -rf "$dir"
    fi
}
trap on_exit EXIT

# the folder: the PostgreSQL server runs as postgres, the jobs as their users: all must reach it
[ -e "$dir" ] || made=1
mkdir -p "$dir"
chmod 0755 "$dir"
runuser -u postgres -- test -x "$dir" 2>/dev/null \
    || die "$dir: the postgres user cannot enter it (a folder above it is closed to others, as mktemp -d makes its own); choose a folder under one that others can enter, such as /var/tmp"
ip link show "$bridge" >/dev/null 2>&1 \
    && die "bridge $bridge exists, and $run_dir names no cluster it belongs to (deploy/cluster/down.sh DIR takes down the cluster in DIR; ip link del $bridge removes the bridge alone)"
started=1
mkdir -p "$run_dir"
echo "$dir" > "$run_dir/dir"

# the network: a bridge with this machine at NET.1 and a veth pair per node
ip link add "$bridge" type bridge
ip addr add "$host_ip/24" dev "$bridge"
ip link set "$bridge" up
if ! iptables -C FORWARD -i "$bridge" -o "$bridge" -j ACCEPT 2>/dev/null; then
    iptables -I FORWARD -i "$bridge" -o "$bridge" -j ACCEPT 2>/dev/null || true  # a DROP policy (Docker's) passes it
fi
{
    echo "127.0.0.1 localhost"
    echo "$host_ip $(hostname) pipeline-controller"
    for node in "${nodes[@]}"; do echo "$(node_ip "$node") $node"; done
} > "$dir/hosts"
for node in "${nodes[@]}"; do
    ns=$(netns_of "$node")
    ip netns add "$ns"
    ip link add "pl-$node" type veth peer name eth0 netns "$ns"
    ip link set "pl-$node" master "$bridge" up
    ip -n "$ns" addr add "$(node_ip "$node")/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" route add default via "$host_ip"
done

# Slurm: the controller on this machine (at the bridge's address), a slurmd per node
cpus=$(nproc)
cat > "$dir/slurm.conf" <<CONF
ClusterName=pipeline
SlurmctldHost=$(hostname)($host_ip)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# a requeued job is held for cred_expire + 1 s (Reason=BeginTime) while every slurmd forgets the
# credential of its killed attempt; Slurm's default is 120 s
AuthInfo=cred_expire=10
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
SlurmdTimeout=10
MessageTimeout=5
KillWait=5
JobRequeue=1
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
SlurmctldPort=$ctld_port
SlurmdPort=$((ctld_port + 1))
SlurmctldPidFile=$run_dir/slurmctld.pid
SlurmdPidFile=$dir/%n/slurmd.pid
SlurmdSpoolDir=$dir/%n/spool
SlurmdLogFile=$dir/%n/slurmd.log
StateSaveLocation=$dir/state
SlurmctldLogFile=$dir/slurmctld.log
$(for node in "${nodes[@]}"; do echo "NodeName=$node NodeAddr=$(node_ip "$node") CPUs=$cpus State=UNKNOWN"; done)
PartitionName=cluster Nodes=$(IFS=,; echo "${nodes[*]}") Default=YES MaxTime=INFINITE State=UP
CONF
mkdir -p "$dir/state"
bash "$here/munge.sh"
SLURM_CONF="$dir/slurm.conf" slurmctld
for node in "${nodes[@]}"; do start_slurmd "$dir" "$node"; done

# PostgreSQL for tuning studies, as the postgres user, on the bridge's address
install -d -o postgres -g postgres "$dir/postgres"
# from a folder postgres can enter: PostgreSQL's tools say so when the caller's is not one
as_postgres() { (cd "$dir/postgres" && runuser -u postgres -- "$@"); }
as_postgres "$pg_bin/initdb" -D "$dir/postgres/data" -U postgres --auth=trust -E UTF8 >/dev/null
echo "host all all $net.0/24 trust" >> "$dir/postgres/data/pg_hba.conf"
as_postgres "$pg_bin/pg_ctl" -D "$dir/postgres/data" -l "$dir/postgres/log" -w \
    -o "-p $pg_port -k $dir/postgres -c listen_addresses=$host_ip" start >/dev/null 2>&1 \
    || die "PostgreSQL did not start on $host_ip:$pg_port: $(grep -m1 -E 'FATAL|ERROR' "$dir/postgres/log" || tail -1 "$dir/postgres/log")"
head -1 "$dir/postgres/data/postmaster.pid" > "$run_dir/postgres.pid"
as_postgres "$pg_bin/createdb" -h "$host_ip" -p "$pg_port" -U postgres optuna

# the MLflow tracking server, artifacts proxied
mkdir -p "$dir/mlflow"
MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false setsid "$project/.venv/bin/mlflow" server \
    --host "$host_ip" --port "$mlflow_port" --workers 1 \
    --backend-store-uri "sqlite:///$dir/mlflow/mlflow.db" --artifacts-destination "$dir/mlflow/artifacts" \
    > "$dir/mlflow.log" 2>&1 < /dev/null &
echo $! > "$run_dir/mlflow.pid"

cat > "$dir/cluster.env" <<ENV
export PIPELINE_CLUSTER_DIR=$dir
export SLURM_CONF=$dir/slurm.conf
export MLFLOW_TRACKING_URI=http://$host_ip:$mlflow_port
export PIPELINE_TUNE_STORAGE=postgresql://postgres@$host_ip:$pg_port/optuna
ENV
export SLURM_CONF="$dir/slurm.conf"
wait_idle "${#nodes[@]}" || die "the nodes did not come up idle; see $dir/slurmctld.log and $dir/node*/slurmd.log"
answers() {  # the MLflow server's /health, with the project's Python (no curl needed)
    "$project/.venv/bin/python" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)" \
        "http://$host_ip:$mlflow_port/health" 2>/dev/null
}
for _ in $(seq 1 240); do
    answers && break
    sleep 0.5
done
answers || die "the MLflow server did not answer; see $dir/mlflow.log"
sinfo -N -o "%N %t %c"
echo "cluster up: source $dir/cluster.env"
