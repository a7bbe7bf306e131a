# The two commands of the README's quick start, each doing all its own set-up:
#
#   make train   # the main job: PPO on the built-in default scenario (no downloads)
#   make test    # the tests (CI runs exactly this: .ci/run)
#
# On first use either one creates .venv: torch's CPU build first (pinned: unpinned, pip fetches
# a multi-GB CUDA build), then this package with its dev and ray extras; later calls reuse it
# (and reinstall when pyproject.toml changes). Pass arguments with ARGS="...", e.g.
# make train ARGS="--seed 1", make test ARGS="-m slow".
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
EXTRAS ?= dev,ray
ARGS ?=
BIN := $(VENV)/bin
STAMP := $(VENV)/.crius-gym-installed

.PHONY: train test setup

train: $(STAMP)
	$(BIN)/python experiments/train_ppo.py $(ARGS)

test: $(STAMP)
	$(BIN)/python -m pytest $(ARGS)

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e ".[$(EXTRAS)]"
	touch $(STAMP)
