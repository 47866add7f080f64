# The two commands of the README: `make run` (the main job) and `make test`. The others:
# `make test-fast` (the inner loop), `make lint` (ruff + mypy), `make dist` (sdist + wheel).
# Each creates its own virtual environment and installs what it needs.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# pytest processes (README: Tests). `make test`: two, one per core (a third made a timing
# comparison of tests/test_simulate_lab.py miss its bound). `make test-fast`: three, because its
# many short tests wait on sockets and deadlines, and a third process fills those waits
# (measured: 87 s against 101 s with two). JOBS=0 / FAST_JOBS=0: one process, no xdist.
JOBS      ?= 2
FAST_JOBS ?= 3
# loadfile: a test file runs in one worker, so its module-scoped fixtures (a moto account, a
# synthesized stack) are built once. (loadgroup's xdist_group marks would do it finer, but with
# pytest 9 they never reach the scheduler: xdist 3.8 renames item._nodeid, pytest 9 reads _id.)
xdist = $(if $(filter-out 0,$(1)),-n $(1) --dist loadfile)
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
	$(BIN)/python -m pytest $(call xdist,$(JOBS)) $(ARGS)

# the inner loop: no CDK synth, no real nginx, nothing marked slow (wheel install, pre-commit
# hook build, moto-backed properties, large inputs); the template properties of
# tests/test_property.py draw a tenth of their examples (`make test` draws them all)
test-fast: venv
	LLM_AFFINITY_PROPERTY_SCALE=0.1 $(BIN)/python -m pytest $(call xdist,$(FAST_JOBS)) -m "not cdk and not nginx and not slow" $(ARGS)

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
