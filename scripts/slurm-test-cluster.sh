#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for the tests in tests/suite/slurm.rs.
#
#   scripts/slurm-test-cluster.sh start   # install when missing, start, wait until idle
#   scripts/slurm-test-cluster.sh stop    # stop the daemons this script started
#   scripts/slurm-test-cluster.sh env     # print `export SLURM_CONF=...`
#
# This machine is the controller and the only compute node (partition
# `debug`). Debian's packages (slurmctld, slurmd, slurm-client, munge) are
# installed with apt-get when missing (root only). Configuration, state,
# spool and logs live under $ROSETTA_SLURM_DIR (default /tmp/rosetta-slurm);
# nothing under /etc/slurm is written, so clients need
# SLURM_CONF=$ROSETTA_SLURM_DIR/slurm.conf (tests/suite/slurm.rs uses that file
# when SLURM_CONF is unset). munged runs on its default socket. There is no
# accounting daemon: ended jobs stay visible to squeue/scontrol for
# MinJobAge (600 s), and rosetta records the final state it sees in the
# session. Processes are tracked with proctrack/linuxproc (no cgroups);
# memory is not enforced. Each CPU may be shared by up to 4 jobs
# (OverSubscribe=FORCE:4) so that a small sweep runs at once on a 2-core CI
# machine.
set -euo pipefail

dir=${ROSETTA_SLURM_DIR:-/tmp/rosetta-slurm}
conf=$dir/slurm.conf

die() { echo "slurm-test-cluster: $*" >&2; exit 1; }

install_packages() {
  local need=()
  command -v slurmctld >/dev/null 2>&1 || need+=(slurmctld)
  command -v slurmd >/dev/null 2>&1 || need+=(slurmd)
  command -v sbatch >/dev/null 2>&1 || need+=(slurm-client)
  command -v munged >/dev/null 2>&1 || need+=(munge)
  [ ${#need[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null 2>&1 || die "missing ${need[*]} and no apt-get to install them"
  [ "$(id -u)" = 0 ] || die "missing ${need[*]}: run as root to install them"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${need[@]}"
}

write_conf() {
  local host cpus mem
  host=$(hostname -s)
  cpus=$(nproc)
  # what slurmd will find, less a margin (a node with more configured memory
  # than it has is drained)
  mem=$(awk '/MemTotal/ { printf "%d", $2 / 1024 * 0.9 }' /proc/meminfo)
  mkdir -p "$dir/state" "$dir/spool"
  cat >"$conf" <<EOF
# written by scripts/slurm-test-cluster.sh: a one-node test cluster
ClusterName=rosetta-test
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldPort=6817
SlurmdPort=6818
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MinJobAge=600
KillWait=5
InactiveLimit=0
SlurmctldTimeout=60
SlurmdTimeout=60
MpiDefault=none
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
}

start_munge() {
  if munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
    return 0
  fi
  [ -f /etc/munge/munge.key ] || die "no /etc/munge/munge.key (reinstall munge)"
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  chmod 0755 /run/munge
  if id munge >/dev/null 2>&1 && command -v runuser >/dev/null 2>&1; then
    runuser -u munge -- munged
  else
    munged --force
  fi
  for _ in $(seq 50); do
    munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  die "munged does not answer (see /var/log/munge/munged.log)"
}

running() { # pid file
  [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null
}

start() {
  install_packages
  [ "$(id -u)" = 0 ] || die "the daemons run as root: run as root"
  write_conf
  start_munge
  export SLURM_CONF=$conf
  running "$dir/slurmctld.pid" || slurmctld -f "$conf"
  running "$dir/slurmd.pid" || slurmd -f "$conf"
  local state=""
  for _ in $(seq 120); do
    state=$(sinfo -h -p debug -o %t 2>/dev/null || true)
    case $state in
      idle*|mix*|alloc*) echo "slurm-test-cluster: node $state ($(sinfo --version)); export SLURM_CONF=$conf"; return 0 ;;
      drain*|inval*|down*) scontrol update NodeName="$(hostname -s)" State=RESUME >/dev/null 2>&1 || true ;;
    esac
    sleep 0.5
  done
  echo "--- slurmctld.log" >&2; tail -20 "$dir/slurmctld.log" >&2 || true
  echo "--- slurmd.log" >&2; tail -20 "$dir/slurmd.log" >&2 || true
  die "the node is not idle after 60 s (sinfo says '${state:-nothing}')"
}

stop_pid() { # pid file, name
  if running "$1"; then
    local pid
    pid=$(cat "$1")
    kill "$pid"
    for _ in $(seq 50); do
      kill -0 "$pid" 2>/dev/null || return 0
      sleep 0.1
    done
    echo "slurm-test-cluster: $2 (pid $pid) did not stop" >&2
  fi
}

stop() {
  [ -f "$conf" ] || { echo "slurm-test-cluster: nothing to stop ($conf absent)"; return 0; }
  SLURM_CONF=$conf scancel --user="$(id -un)" >/dev/null 2>&1 || true
  stop_pid "$dir/slurmd.pid" slurmd
  stop_pid "$dir/slurmctld.pid" slurmctld
  # munged is left running: other users of munge may share it
}

case ${1:-} in
  start) start ;;
  stop) stop ;;
  env) echo "export SLURM_CONF=$conf" ;;
  *) echo "usage: $0 start|stop|env" >&2; exit 2 ;;
esac
