#!/usr/bin/env bash
# A one-node SLURM cluster on this machine for tests/test_workflow_slurm.py (make slurm-test):
# Debian's slurm-wlm (22.05) and munge, installed with apt-get when missing (as root, like fio in the
# Makefile's tools), slurmctld and slurmd on this host, no accounting daemon (the executor plugin reads
# job states with squeue: --slurm-status-command squeue, MinJobAge 600 s keeps finished jobs visible).
#   tests/slurm/cluster.sh start   install if needed, write /etc/slurm/slurm.conf, start the daemons
#   tests/slurm/cluster.sh stop    stop the daemons this script started
set -euo pipefail
state=/tmp/lsm-gnn-slurm
case "${1:-start}" in
start)
  if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    [ "$(id -u)" = 0 ] || { echo "cluster.sh: slurm-wlm and munge are missing and this is not root" >&2; exit 3; }
    apt-get update -qq >/dev/null 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
  fi
  mkdir -p "$state"/{spool,state,log} /etc/slurm /run/munge
  chown munge:munge /run/munge
  [ -s /etc/munge/munge.key ] || { mungekey --create 2>/dev/null || /usr/sbin/create-munge-key -f; }
  pgrep -x munged >/dev/null || su -s /bin/sh munge -c /usr/sbin/munged
  host=$(hostname)
  cpus=$(nproc)
  mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 * 9 / 10 ))
  sed -e "s|@HOST@|$host|g" -e "s|@CPUS@|$cpus|g" -e "s|@MEM@|$mem|g" -e "s|@STATE@|$state|g" \
    "$(dirname "$0")/slurm.conf.in" > /etc/slurm/slurm.conf
  pgrep -x slurmctld >/dev/null || slurmctld
  pgrep -x slurmd >/dev/null || slurmd
  for _ in $(seq 30); do
    sinfo -h -o %T 2>/dev/null | grep -qE "idle|mixed|allocated" && { sinfo; exit 0; }
    sleep 1
  done
  echo "cluster.sh: the node did not come up; see $state/log" >&2
  exit 4
  ;;
stop)
  for d in slurmd slurmctld; do
    [ -s "$state/$d.pid" ] && kill "$(cat "$state/$d.pid")" 2>/dev/null || true
  done
  ;;
esac
