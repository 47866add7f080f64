# The two commands of the README: `make run` (the main job) and `make test`. The others:
# `make test-fast` (the inner loop), `make lint` (ruff + mypy), `make dist` (sdist + wheel).
# Each creates its own virtual environment and installs what it needs.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# pytest processes: two by default (README: Tests); `make test JOBS=0` runs in one process
JOBS   ?= 2
# loadfile: a test file runs in one worker, so its module-scoped fixtures (a moto account, a
# synthesized stack) are built once. (loadgroup's xdist_group marks would do it finer, but with
# pytest 9 they never reach the scheduler: xdist 3.8 renames item._nodeid, pytest 9 reads _id.)
XDIST  := $(if $(filter-out 0,$(JOBS)),-n $(JOBS) --dist loadfile)
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20

.PHONY: run test test-fast lint dist venv bench clean

$(BIN)/.installed: pyproject.toml constraints/ci.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]" -c constraints/ci.txt
	touch $@

venv: $(BIN)/.installed

# `make run VERBOSE=1` also lists every acknowledged cdk-nag / llm-affinity finding with its reason
run: venv
	@VERBOSE=$(VERBOSE) bash scripts/run.sh

# the whole suite; `make test ARGS='-k audit'` passes options to pytest
test: venv
	$(BIN)/python -m pytest $(XDIST) $(ARGS)

# the inner loop: no CDK synth, no real nginx, no wheel install, no pre-commit hook build, no
# moto-backed properties; the template properties of tests/test_property.py draw a tenth of
# their examples (`make test` draws them all)
test-fast: venv
	LLM_AFFINITY_PROPERTY_SCALE=0.1 $(BIN)/python -m pytest $(XDIST) -m "not cdk and not nginx and not slow" $(ARGS)

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# sdist + wheel into dist/, then their metadata and README rendering checked
dist: venv
	rm -rf dist
	$(BIN)/python -m build --outdir dist .
	$(BIN)/twine check --strict dist/*

bench: venv
	$(BIN)/python bench/lint_vs_cfnlint.py --quick

clean:
	rm -rf $(VENV) cdk.out dist build .pytest_cache .hypothesis .mypy_cache .ruff_cache
