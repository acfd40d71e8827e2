# The README's commands. Each builds its own environment first (idempotent: a second call
# only re-installs when requirements.txt or pyproject.toml changed).
VENV ?= .venv
PY := $(VENV)/bin/python
# make reproduce DATASET=igb-tiny (any form docs/workflow.md lists) or SIZE=tiny (= synthetic-tiny);
# neither: the workflow's default (synthetic-small, config/config.yaml). DEVICE=cuda: the training
# jobs train on the GPU (the workflow's `device`; VENV must then hold a CUDA build of torch, which
# requirements.txt's CPU pins do not install: docs/run-on-your-gpus.md). Snakemake reads
# profiles/default (timed=1: no two timed jobs overlap; --rerun-incomplete) without flags.
DATASET ?=
SIZE ?=
DEVICE ?=
CORES ?= 2
ASV_ARGS ?=
export DGLBACKEND := pytorch

.PHONY: env tools reproduce reproduce-testbed report lint test kill-test slurm-test unit-tests bench bench-compare clean-results reference compare-reference gpu-carry gpu-check gpu-figure

env: $(VENV)/.installed tools

# fio measures the storage device's limit in the storage benchmark. Installed here when missing and
# running as root with apt-get (Debian/Ubuntu); otherwise a note, never a failure.
tools:
	@command -v fio >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  echo "installing fio (apt-get install -y fio)" && \
	  { apt-get install -y -qq fio >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq fio >/dev/null 2>&1; }; }; } || \
	  echo "note: fio is not installed (Debian/Ubuntu: apt-get install fio); the storage benchmark will report the device limit as not measured" >&2

$(VENV)/.installed: requirements.txt pyproject.toml setup.py
	@command -v python3.11 >/dev/null || { echo "python3.11 is required" >&2; exit 1; }
	@test -x $(PY) || python3.11 -m venv $(VENV)
	@echo "installing pinned dependencies into $(VENV) (first time: about 2 minutes)"
	@$(PY) -m pip install -q --disable-pip-version-check -r requirements.txt 2>&1 | grep -v "is ignored: it is neither" || true
	@$(PY) -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e . 2>&1 | grep -v "is ignored: it is neither" || true
	@$(PY) -c "import lsm_gnn, dgl, torch, numba" 
	@touch $@

SNAKEMAKE_CONFIG = $(if $(strip $(DATASET)$(SIZE)$(DEVICE)),--config $(if $(DATASET),dataset=$(DATASET)) $(if $(SIZE),size=$(SIZE)) $(if $(DEVICE),device=$(DEVICE)))
# workflow/scripts/reproduce.sh: a run killed at any moment is picked up by the next `make reproduce`
# (it removes the lock a killed Snakemake leaves, only when no other run of it is alive here)
reproduce: env
	bash workflow/scripts/reproduce.sh $(VENV)/bin/snakemake --snakefile workflow/Snakefile --cores $(CORES) $(SNAKEMAKE_CONFIG)

# The paper's testbed, emulated (workflow/rules/65-testbed.smk; docs/workflow.md, "Time"): the
# reproduction with testbed=true. TESTBED_CONFIG: more --config values, e.g. testbed_repeats=2
# (every stage charged at the part that runs it in the paper's testbed, Dist-DGL's NIC included;
# docs/accelerators.md, "Every stage at its part's speed")
TESTBED_CONFIG ?=
reproduce-testbed: env
	bash workflow/scripts/reproduce.sh $(VENV)/bin/snakemake --snakefile workflow/Snakefile --cores $(CORES) \
	  --config testbed=true $(if $(DATASET),dataset=$(DATASET)) $(if $(SIZE),size=$(SIZE)) $(TESTBED_CONFIG)

# Snakemake's own report of a finished reproduction (same DATASET / SIZE): every figure and table
# with its caption, the verdicts first, the provenance of each output; beside report.md.
report: env
	$(VENV)/bin/snakemake --snakefile workflow/Snakefile $(SNAKEMAKE_CONFIG) --report $(REPORT)/report.zip

# the workflow's files in Snakemake's lint and snakefmt's format (CI runs both: tests/test_workflow_lint.py)
lint: env
	$(VENV)/bin/snakemake --snakefile workflow/Snakefile --lint
	$(VENV)/bin/snakefmt --check workflow

# The suite on TEST_WORKERS processes (pytest-xdist; 0: one process). --dist loadfile keeps each test
# file on one worker, so a module's fixtures (two spawned ranks, the fault suite's cheap run) are set
# up once. On the 2-core VM (2026-12-02): 634 s in one process pinned to one core beside an asv run,
# 251 s with 2 workers on the otherwise idle machine (the workflow test alone: about 2 minutes).
# Before the suite, both carried folders (downloads: the suite itself downloads nothing): the GPU
# call's (cp312, its size is tested) and the rehearsal's (cp311, tests/test_gpu_check_rehearsal.py).
TEST_WORKERS ?= 2
test: env gpu-carry
	@$(MAKE) --no-print-directory gpu-carry PYVER=3.11 CARRY=.gpu-carry-py311
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not kill and not slurm and not unit" tests $(PYTEST_ARGS)

# The workflow killed with SIGKILL at 10 seeded random moments and rerun each time
# (tests/test_workflow_kill.py; docs/workflow.md): its own target and CI step, as it runs the
# shrunk synthetic-tiny reproduction about 12 times; with it, the fault suite's interrupted-workflow cases
# (tests/test_faults.py, docs/faults.md). KILL_TEST_FULL=1: the default tiny matrix.
kill-test: env
	$(PY) -m pytest -q -s -m kill tests/test_workflow_kill.py tests/test_faults.py $(PYTEST_ARGS)

# Snakemake's unit tests of the workflow's rules (.tests/unit; tests/test_workflow_unit.py; docs/workflow.md,
# Unit tests): every rule's job rerun on its recorded inputs; regenerate with tools/unit_tests.py
unit-tests: env
	$(PY) -m pytest -q -m unit tests/test_workflow_unit.py $(PYTEST_ARGS)

# The workflow as SLURM jobs on a one-node cluster started here (tests/slurm/cluster.sh installs
# Debian's slurm-wlm and munge when missing, as root) against a local run (tests/test_workflow_slurm.py)
slurm-test: env
	$(PY) -m pytest -q -s -m slurm tests/test_workflow_slurm.py $(PYTEST_ARGS)

# The GPU call (README, Running on GPUs; docs/cache-gpu.md, The first call). gpu-carry: the wheels
# of what the GPU machine's image lacks (tools/gpu-carry.txt at requirements.txt's pins) into CARRY,
# for CPython PYVER; prints their sizes with the working tree's (a call sends at most 64 MiB).
# Needs pip and PyPI only (no env: it must not touch the virtualenv). gpu-check: on the GPU machine,
# tools/gpu-check.sh (GPU_CHECK_ARGS, e.g. --quick, go to lsm-gnn check gpu).
PYVER ?= 3.12
CARRY ?= .gpu-carry
CARRY_PY := $(if $(wildcard $(PY)),$(PY),python3)
gpu-carry:
	@$(CARRY_PY) tools/gpu_carry.py --python-version $(PYVER) --out $(CARRY)

gpu-check:
	tools/gpu-check.sh $(GPU_CHECK_OUT)

# the GPU calls' results (reports/gpu/*/gpu_check.json) as one figure: reports/gpu/gpu_calls.png
gpu-figure: env
	$(VENV)/bin/python workflow/scripts/gpu_report.py reports/gpu

# asv builds the project at the benchmarked commit in its own virtualenv (asv.conf.json; the first
# run creates it: a few minutes), runs the tip of main, and writes the HTML to .asv/html.
# Compare two commits: make bench-compare A=<commit> B=<commit> (below; docs/benchmarks.md).
bench: env
	$(VENV)/bin/asv machine --yes >/dev/null
	$(VENV)/bin/asv run --show-stderr $(ASV_ARGS)
	$(VENV)/bin/asv publish

# Behaviour changes (track_ counts not exactly equal) and performance changes (time_ medians past
# the factor, with asv's significance test) of B against A, measured in interleaved rounds (one asv
# run each, the commits' order alternating: A B, B A, ...) on one CPU. B may list several commits (each compared with A). Exit status 1 performance, 2
# behaviour, 3 both. COMPARE_ARGS: e.g. --factor 1.3, --cpu 0, -b bench_cache (docs/benchmarks.md).
A ?=
B ?=
COMPARE_ARGS ?=
bench-compare: env
	@test -n "$(A)" && test -n "$(B)" || { echo "usage: make bench-compare A=<commit> B=<commit>" >&2; exit 2; }
	$(PY) benchmarks/compare.py $(A) $(B) $(COMPARE_ARGS)

# The reference report (reports/reference/, docs/workflow.md): `make reference` runs the default
# reproduction on a clean tree with no results yet, timed, and copies its report in with
# reference.json (the commit it was built at, the date, the wall time, the storage device and the
# memory bound; tools/reference.py); `make reference WALL_S=SECONDS` takes REPORT, a finished run's
# report folder, with the wall time that run took. Then `lsm-gnn report quote` fills the numbers the
# README and docs quote from it. `make compare-reference` puts REPORT beside it (exit status 1 when a
# hardware-independent figure differs).
# REFERENCE_TARGET=reproduce-testbed builds it with the emulated testbed (claim (a)'s emulated column).
REPORT ?= reports/$(if $(SIZE),synthetic-$(SIZE),$(if $(DATASET),$(notdir $(DATASET)),synthetic-small))
REFERENCE_TARGET ?= reproduce
reference:
	python3 tools/reference.py $(if $(WALL_S),take $(REPORT) --wall-s $(WALL_S),run --report $(REPORT) -- $(MAKE) $(REFERENCE_TARGET)$(if $(SIZE), SIZE=$(SIZE))$(if $(DATASET), DATASET=$(DATASET)))
	@if [ -x $(VENV)/bin/lsm-gnn ]; then $(VENV)/bin/lsm-gnn report quote; else echo "then: lsm-gnn report quote (fills the README's and docs' quoted numbers)"; fi

compare-reference: env
	$(VENV)/bin/lsm-gnn report compare reports/reference $(REPORT)
