#!/usr/bin/env bash
# The GPU call as one script (README "Running on GPUs"; docs/cache-gpu.md "The first call").
#
#   tools/gpu-check.sh [DIR]        (make gpu-check; DIR defaults to $OUT, else ./gpu-check-out)
#
# From a checkout on a machine without network: installs what the carried folder holds (make
# gpu-carry) and the project into a folder of its own (pip --no-index --no-deps --target), then
# `lsm-gnn check gpu` time-boxed so that everything ends within GPU_CHECK_BUDGET seconds. Every
# step runs whatever the steps before it did; a failed install falls back to the checkout on
# PYTHONPATH. DIR ends with at most 8 files: gpu_check.json (written after every step of the
# check), gpu-check-script.json (this script's steps), gpu-check-logs.tar.gz (every log) and the
# measured accelerator profile (<gpu>-measured.yaml) when that step ran.
#
# Exit status: lsm-gnn check gpu's (0 all passed and met, 1 a failure, 2 no GPU, 3 a target
# missed), or 1 when the check wrote no gpu_check.json.
#
# Environment: PYTHON (default: the GPU image's /opt/torch/.venv/bin/python3, else python3),
# GPU_CARRY (default .gpu-carry), GPU_CHECK_BUDGET (seconds, default 280: the whole call under 5 minutes
# with its timeout_s of 300, so a rerun fits the 15 minutes of device time a task is lent; the install
# caps, PACK_S and the check's plan, lsm_gnn.check.gpu.BUDGET_S["full"], sum to at most it:
# tests/test_gpu_check.py), GPU_CHECK_ARGS (more options for lsm-gnn check gpu, e.g. --quick).
# Needs no dgl and no network.
set -u
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO" || exit 1
DIR=${1:-${OUT:-$REPO/gpu-check-out}}
mkdir -p "$DIR" && DIR=$(cd "$DIR" && pwd) || { echo "gpu-check: cannot create $DIR" >&2; exit 1; }
if [ -z "${PYTHON:-}" ]; then
  if [ -x /opt/torch/.venv/bin/python3 ]; then PYTHON=/opt/torch/.venv/bin/python3; else PYTHON=python3; fi
fi
CARRY=${GPU_CARRY:-$REPO/.gpu-carry}
BUDGET=${GPU_CHECK_BUDGET:-280}
PACK_S=10                           # kept back for packing the logs (1-2 s on the H200 calls)
T0=$(date +%s)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/lsm-gnn-gpu-check.XXXXXX")
LOGS=$WORK/logs SITE=$WORK/site PKG=$WORK/pkg
mkdir -p "$LOGS" "$SITE" "$PKG"
STEPS_JSON=""
export PYTHONUNBUFFERED=1 DGLBACKEND=pytorch PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INDEX=1

left() { echo $(( BUDGET - PACK_S - ($(date +%s) - T0) )); }

# step NAME LIMIT CMD...: CMD with its output in LOGS/NAME.log, killed after LIMIT s; records
# {name, rc, seconds} and never stops the script
step() {
  local name=$1 limit=$2 t rc
  shift 2
  t=$(date +%s)
  if [ "$limit" -lt 5 ]; then
    echo "[$name] not run: the budget is spent" | tee "$LOGS/$name.log"
    rc=125
  else
    timeout -k 5 "$limit" "$@" >"$LOGS/$name.log" 2>&1
    rc=$?
    [ $rc = 124 ] && echo "[$name] killed after $limit s (time limit)" >>"$LOGS/$name.log"
  fi
  local secs=$(( $(date +%s) - t ))
  echo "[$name] exit $rc, $secs s (limit $limit s); log: $name.log"
  [ $rc = 0 ] || tail -n 5 "$LOGS/$name.log" | sed "s/^/[$name]   /"
  STEPS_JSON="$STEPS_JSON${STEPS_JSON:+,}{\"name\": \"$name\", \"rc\": $rc, \"seconds\": $secs, \"limit_s\": $limit}"
  return $rc
}

lim() { local l; l=$(left); [ "$1" -lt "$l" ] && echo "$1" || echo "$l"; }

echo "[gpu-check] $(date -u +%FT%TZ) python: $PYTHON; carried: $CARRY; budget: $BUDGET s; out: $DIR"

# 1. the carried wheels, without network (pip reads only the folder)
if ls "$CARRY"/*.whl >/dev/null 2>&1; then
  step install-carry "$(lim 15)" "$PYTHON" -m pip install --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target "$SITE" "$CARRY"/*.whl
else
  echo "[install-carry] no wheels in $CARRY (make gpu-carry): the image's packages only" | tee "$LOGS/install-carry.log"
  STEPS_JSON="$STEPS_JSON${STEPS_JSON:+,}{\"name\": \"install-carry\", \"rc\": 126, \"seconds\": 0, \"limit_s\": 0}"
fi
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"

# 2. the project, built from a copy of its sources (a build inside the checkout would leave build/
#    there); its CUDA sources come as package data (lsm_gnn.kernels)
mkdir -p "$WORK/src"
cp -r lsm_gnn baselines cuda setup.py pyproject.toml README.md "$WORK/src/" 2>"$LOGS/copy.log"
if step install-project "$(lim 20)" "$PYTHON" -m pip install --no-index --no-deps --no-build-isolation --no-compile \
     --no-cache-dir --target "$PKG" "$WORK/src"; then
  export PYTHONPATH="$PKG:$PYTHONPATH"
else
  echo "[install-project] failed: the checkout on PYTHONPATH instead"
  export PYTHONPATH="$REPO:$PYTHONPATH"
fi

# 3. the GPU tests collect without a GPU and without dgl (what `pytest -m gpu` will run). Where a GPU
#    is present the check's tests step collects the same selection (a collection error fails the
#    check), so this one is skipped there: it took 21-32 s of each H200 call
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q "^GPU "; then
  echo "[collect] skipped: a GPU is present (the check's tests step collects the GPU tests)" | tee "$LOGS/collect.log"
  STEPS_JSON="$STEPS_JSON${STEPS_JSON:+,}{\"name\": \"collect\", \"rc\": 0, \"seconds\": 0, \"limit_s\": 0, \"skipped\": \"a GPU is present\"}"
  COLLECTED="skipped (a GPU is present: the check's tests step collects)"
else
  step collect "$(lim 90)" "$PYTHON" -m pytest -m gpu --collect-only -q -rs -p no:cacheprovider tests
  COLLECTED=$(grep -E "collected|error" "$LOGS/collect.log" | tail -n 1 | tr -d '"\\')
fi
echo "[collect]   $COLLECTED"

# 4. the check: from the work folder, so its steps import the installed package; its tests run from
#    the checkout (their conftest); the time it gets is what is left
CHECK_BUDGET=$(left)
CHECK_RC=1
if [ "$CHECK_BUDGET" -ge 30 ]; then
  echo "[check] lsm-gnn check gpu --budget $CHECK_BUDGET ${GPU_CHECK_ARGS:-}"
  t=$(date +%s)
  # shellcheck disable=SC2086  # GPU_CHECK_ARGS is a list of options
  (cd "$WORK" && timeout -k 5 $(( CHECK_BUDGET + 10 )) "$PYTHON" -m lsm_gnn.cli check gpu --out "$DIR" \
      --logs "$LOGS/check" --tests "$REPO/tests" --data-dir "$REPO/data/gpu-check" --budget "$CHECK_BUDGET" \
      ${GPU_CHECK_ARGS:-}) 2> >(tee "$LOGS/check.stderr.log" >&2) | tee "$LOGS/check.log"
  CHECK_RC=${PIPESTATUS[0]}
  STEPS_JSON="$STEPS_JSON,{\"name\": \"check\", \"rc\": $CHECK_RC, \"seconds\": $(( $(date +%s) - t )), \"limit_s\": $(( CHECK_BUDGET + 10 ))}"
else
  echo "[check] not run: $CHECK_BUDGET s left of the budget"
  STEPS_JSON="$STEPS_JSON,{\"name\": \"check\", \"rc\": 125, \"seconds\": 0, \"limit_s\": 0}"
fi
[ -s "$DIR/gpu_check.json" ] || { echo "[check] wrote no gpu_check.json"; [ "$CHECK_RC" = 0 ] && CHECK_RC=1; }
case $CHECK_RC in 0|1|2|3) ;; *) CHECK_RC=1 ;; esac

# 5. one archive of every log, this script's own record, nothing else in DIR
"$PYTHON" -m pip list --path "$SITE" --path "$PKG" >"$LOGS/carried-installed.txt" 2>&1
"$PYTHON" -m pip list >"$LOGS/pip-list.txt" 2>&1
tar -czf "$DIR/gpu-check-logs.tar.gz" -C "$WORK" logs 2>/dev/null || echo "[pack] tar failed"
cat >"$DIR/gpu-check-script.json" <<EOF
{"exit_status": $CHECK_RC, "budget_s": $BUDGET, "elapsed_s": $(( $(date +%s) - T0 )), "python": "$PYTHON",
 "carry": "$CARRY", "logs": "gpu-check-logs.tar.gz", "collected": "$COLLECTED", "steps": [$STEPS_JSON]}
EOF
rm -rf "$WORK"
echo "[gpu-check] exit $CHECK_RC after $(( $(date +%s) - T0 )) s; $(ls "$DIR" | wc -l) files in $DIR: $(ls "$DIR" | tr '\n' ' ')"
exit "$CHECK_RC"
