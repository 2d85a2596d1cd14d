#!/usr/bin/env bash
# A one-node Slurm cluster on this host, for the tests of multi-worker training under Slurm:
#   scripts/slurm-local.sh start DIR   # writes DIR/slurm.conf, starts munged, slurmctld, slurmd
#   scripts/slurm-local.sh stop DIR
# Then `SLURM_CONF=DIR/slurm.conf srun -n 2 ...` or `sbatch`. Needs root and Debian's
# slurm-wlm and munge packages (scripts/system-deps.sh installs them).
set -euo pipefail
action=${1:?start or stop}
dir=$(realpath -m "${2:?a folder for the configuration, state and logs}")
node=$(hostname)
ctld_port=${SLURM_LOCAL_PORT:-16817}

if [ "$action" = stop ]; then
    for pidfile in "$dir/slurmd.pid" "$dir/slurmctld.pid"; do
        [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true
    done
    exit 0
fi

mkdir -p "$dir/slurmd" "$dir/state"
cat > "$dir/slurm.conf" <<CONF
ClusterName=local
SlurmctldHost=$node
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
SlurmctldPort=$ctld_port
SlurmdPort=$((ctld_port + 1))
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmdSpoolDir=$dir/slurmd
StateSaveLocation=$dir/state
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
NodeName=$node CPUs=$(nproc) State=UNKNOWN
PartitionName=local Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF

if ! pgrep -x munged >/dev/null; then
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    [ -s /etc/munge/munge.key ] || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    chown -R munge:munge /run/munge /var/log/munge /var/lib/munge /etc/munge 2>/dev/null || true
    chmod 400 /etc/munge/munge.key
    runuser -u munge -- /usr/sbin/munged
fi
export SLURM_CONF="$dir/slurm.conf"
slurmctld
slurmd
for _ in $(seq 1 60); do
    if sinfo -h -o %t 2>/dev/null | grep -qx idle; then
        echo "slurm: node $node idle; SLURM_CONF=$SLURM_CONF"
        exit 0
    fi
    sleep 0.5
done
echo "error: slurm did not come up; see $dir/slurmctld.log and $dir/slurmd.log" >&2
exit 1
