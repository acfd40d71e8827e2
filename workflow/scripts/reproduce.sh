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
if ! flock -n 9; then
  echo "reproduce.sh: another run through this script is still alive in $dir (its jobs hold $dir/.snakemake/reproduce.flock)" >&2
  exit 2
fi
"$snakemake" "${args[@]}" --unlock >/dev/null 2>&1 || true
exec "$snakemake" "${args[@]}"
