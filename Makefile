# The two commands of the README: `make run` (the main job) and `make test`.
# Each creates its own virtual environment and installs what it needs.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20

.PHONY: run test venv bench clean

$(BIN)/.installed: pyproject.toml constraints/ci.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]" -c constraints/ci.txt
	touch $@

venv: $(BIN)/.installed

# `make run VERBOSE=1` also lists every acknowledged cdk-nag / llm-affinity finding with its reason
run: venv
	@VERBOSE=$(VERBOSE) bash scripts/run.sh

# `make test ARGS='-m "not cdk"'` passes options to pytest (here: skip the slow CDK synths)
test: venv
	$(BIN)/python -m pytest $(ARGS)

bench: venv
	$(BIN)/python bench/lint_vs_cfnlint.py --quick

clean:
	rm -rf $(VENV) cdk.out .pytest_cache .hypothesis
