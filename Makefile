# The README's commands. Each builds its own environment first (idempotent: a second call
# only re-installs when requirements.txt or pyproject.toml changed).
VENV ?= .venv
PY := $(VENV)/bin/python
SIZE ?= tiny
CORES ?= 2
export DGLBACKEND := pytorch

.PHONY: env reproduce test bench clean-results

env: $(VENV)/.installed

$(VENV)/.installed: requirements.txt pyproject.toml
	@command -v python3.11 >/dev/null || { echo "python3.11 is required" >&2; exit 1; }
	@test -x $(PY) || python3.11 -m venv $(VENV)
	@echo "installing pinned dependencies into $(VENV) (first time: about 2 minutes)"
	@$(PY) -m pip install -q --disable-pip-version-check -r requirements.txt 2>&1 | grep -v "is ignored: it is neither" || true
	@$(PY) -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e . 2>&1 | grep -v "is ignored: it is neither" || true
	@$(PY) -c "import lsm_gnn, dgl, torch, numba" 
	@touch $@

reproduce: env
	$(VENV)/bin/snakemake --snakefile Snakefile --cores $(CORES) --config size=$(SIZE) --rerun-incomplete

test: env
	$(PY) -m pytest -q tests $(PYTEST_ARGS)

bench: env
	$(VENV)/bin/asv machine --yes >/dev/null && $(VENV)/bin/asv run --python=same --quick
