#!/usr/bin/env bash
# munged (Slurm's authentication) started unless it runs: a key made once, its folders owned by
# the munge user. Used by deploy/cluster/up.sh.
set -euo pipefail
if ! pgrep -x munged >/dev/null; then
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    [ -s /etc/munge/munge.key ] || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    chown -R munge:munge /run/munge /var/log/munge /var/lib/munge /etc/munge 2>/dev/null || true
    chmod 400 /etc/munge/munge.key
    runuser -u munge -- /usr/sbin/munged
fi
