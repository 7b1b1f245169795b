#!/usr/bin/env bash
# A small Slurm on this machine, for testing the pipeline's Slurm route for real
# (snakemake-executor-plugin-slurm -> sbatch -> slurmctld -> slurmd). Needs root.
#
#   tests/slurm/local-cluster.sh install   # apt-get the Debian packages (Slurm 22.05, munge)
#   tests/slurm/local-cluster.sh start DIR # write DIR/slurm.conf, start munged, slurmctld, slurmd
#   tests/slurm/local-cluster.sh stop DIR  # stop the daemons by PID
#
# After `start`, `export SLURM_CONF=DIR/slurm.conf` points sbatch/squeue/sinfo at it; the
# config is also linked at /etc/slurm/ (job steps read it there), and unlinked by `stop`.
# The node has two fake GPUs (gres "gpu:fake:2", backed by /dev/null and /dev/zero), so GPU
# requests schedule and get CUDA_VISIBLE_DEVICES; the jobs themselves run on the CPU.
# Partition "debug" (the default) is that one node. Partition "multi" adds a second node,
# "<host>-2", a second slurmd on this same machine (Slurm's multiple-slurmd: its own port,
# spool and log; the same CPUs, memory and fake GPUs), so that a job can span two nodes.
# There is no slurmdbd, so `sacct` does not work: the Snakemake profile must use
# `slurm-status-command: squeue`, and MinJobAge keeps finished jobs visible to squeue (an hour:
# tests/test_slurm.py counts a run's completed jobs after it, which takes minutes on a busy machine).
set -euo pipefail

cmd=${1:-}
dir=${2:-/tmp/dcsr-slurm}

die() { echo "local-cluster: $*" >&2; exit 1; }

install_packages() {
    if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null \
        && command -v munged >/dev/null; then
        return 0
    fi
    [ "$(id -u)" = 0 ] || die "installing Slurm needs root (apt-get)"
    command -v apt-get >/dev/null || die "installing Slurm needs apt-get (Debian/Ubuntu)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q --no-install-recommends slurmctld slurmd slurm-client munge \
        || { apt-get update -q && apt-get install -y -q --no-install-recommends slurmctld slurmd slurm-client munge; }
}

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
    local limit=$1 what=$2
    shift 2
    for _ in $(seq 1 "$((limit * 2))"); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.5
    done
    die "$what did not come up within ${limit}s (logs in $dir)"
}

start_cluster() {
    [ "$(id -u)" = 0 ] || die "the test cluster runs its daemons as root"
    command -v slurmctld >/dev/null || die "Slurm is not installed: run '$0 install' first"
    local host cpus mem
    host=$(hostname -s)
    cpus=$(nproc)
    # leave the OS 2 GiB; Slurm refuses a node that reports less memory than configured
    mem=$(awk '/MemTotal/ {m = int($2 / 1024) - 2048; print (m > 1000 ? m : 1000)}' /proc/meminfo)
    mkdir -p "$dir/spool/ctld" "$dir/spool/d-$host" "$dir/spool/d-$host-2"
    cat >"$dir/slurm.conf" <<EOF
ClusterName=dcsr-test
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$dir/spool/ctld
SlurmdSpoolDir=$dir/spool/d-%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
SlurmctldPort=6817
SlurmdPort=6818
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
MinJobAge=3600
SchedulerType=sched/backfill
GresTypes=gpu
NodeName=$host NodeHostname=$host Port=6818 CPUs=$cpus RealMemory=$mem Gres=gpu:fake:2 State=UNKNOWN
NodeName=$host-2 NodeHostname=$host Port=6819 CPUs=$cpus RealMemory=$mem Gres=gpu:fake:2 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
PartitionName=multi Nodes=$host,$host-2 MaxTime=INFINITE State=UP
EOF
    cat >"$dir/gres.conf" <<EOF
NodeName=$host,$host-2 Name=gpu Type=fake File=/dev/null
NodeName=$host,$host-2 Name=gpu Type=fake File=/dev/zero
EOF
    # The job steps need the config at Slurm's default path too: snakemake's jobstep executor
    # drops SLURM_* variables (SLURM_CONF included) before its nested srun, as on a real
    # cluster, where /etc/slurm/slurm.conf is always there. Link ours, never replace a real one.
    mkdir -p /etc/slurm
    local f
    for f in slurm.conf gres.conf; do
        if [ -e "/etc/slurm/$f" ] && [ ! -L "/etc/slurm/$f" ]; then
            die "/etc/slurm/$f exists and is not this test's link: not touching a real Slurm config"
        fi
        ln -sfn "$dir/$f" "/etc/slurm/$f"
    done
    export SLURM_CONF=$dir/slurm.conf
    install -d -o munge -g munge -m 0755 /run/munge
    if ! pgrep -x munged >/dev/null; then
        runuser -u munge -- /usr/sbin/munged
    fi
    wait_for 20 munged munge -n
    slurmctld -f "$dir/slurm.conf"
    wait_for 60 slurmctld scontrol ping
    slurmd -f "$dir/slurm.conf" -N "$host"
    slurmd -f "$dir/slurm.conf" -N "$host-2"
    wait_for 60 "the nodes (idle)" bash -c "[ \"\$(sinfo -h -N -o %t | sort -u)\" = idle ]"
    echo "local-cluster: up; export SLURM_CONF=$dir/slurm.conf"
}

stop_cluster() {
    local f pid
    for f in "$dir"/slurmd-*.pid "$dir/slurmd.pid" "$dir/slurmctld.pid"; do
        if [ -f "$f" ]; then
            pid=$(cat "$f")
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
            kill -9 "$pid" 2>/dev/null || true
            rm -f "$f"
        fi
    done
    for f in slurm.conf gres.conf; do
        if [ -L "/etc/slurm/$f" ] && [ "$(readlink "/etc/slurm/$f")" = "$dir/$f" ]; then
            rm -f "/etc/slurm/$f"
        fi
    done
}

case "$cmd" in
    install) install_packages ;;
    start) start_cluster ;;
    stop) stop_cluster ;;
    *) die "usage: $0 install|start DIR|stop DIR" ;;
esac
