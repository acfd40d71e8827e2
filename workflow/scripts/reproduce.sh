#!/usr/bin/env bash
# The documented command (make reproduce; tests/test_workflow_kill.py): run Snakemake so that a run
# killed at any moment (SIGKILL, a lost node, a time limit) is picked up by the next one.
#   workflow/scripts/reproduce.sh SNAKEMAKE [snakemake arguments, --directory DIR among them]
# Snakemake's own lock (.snakemake/locks) names no process, so a killed run leaves it behind and the
# next run refuses to start ("Directory cannot be locked"; found by the kill test). This holds an
# flock on DIR/.snakemake/reproduce.flock for as long as Snakemake and its jobs run: the kernel
# drops it when the last of them dies, however they die. Holding it, no other run through this
# script is alive in DIR, so a Snakemake lock there is stale: --unlock removes it, then the run goes
# on (profiles/default: --rerun-incomplete reruns the jobs that were cut off).
# A killed run's processes take a moment to exit after the SIGKILL (a large Python process unmaps
# its memory; 12 ms measured here): a rerun started at once found the flock still held in 2 of 10
# tries (the kill test failed so on CI), so it waits up to REPRODUCE_LOCK_WAIT_S (30 s) for the
# flock before it calls the other run alive.
set -euo pipefail
snakemake="$1"
shift
dir=.
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  if [[ ${args[i]} == --directory || ${args[i]} == -d ]]; then dir=${args[i + 1]}; fi
done
mkdir -p "$dir/.snakemake"
exec 9>"$dir/.snakemake/reproduce.flock"
wait_s=${REPRODUCE_LOCK_WAIT_S:-30}
if ! flock -n 9; then
  echo "reproduce.sh: waiting up to ${wait_s} s for a previous run's processes in $dir to exit" >&2
  if ! flock -w "$wait_s" 9; then
    echo "reproduce.sh: another run through this script is still alive in $dir (its jobs hold $dir/.snakemake/reproduce.flock after ${wait_s} s)" >&2
    exit 2
  fi
fi
"$snakemake" "${args[@]}" --unlock >/dev/null 2>&1 || true
exec "$snakemake" "${args[@]}"
