# Developer and CI entry points. Every target runs inside $(VENV), created on first use and
# re-installed when pyproject.toml changes (the stamp file), so a fresh clone needs only Python
# and the package registries. Override the venv with `make test VENV=/path/to/venv`.

VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
QASPER ?= ../shared/data/qasper/dev.jsonl

.PHONY: venv demo test lint bench

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

demo: venv
	$(BIN)/gated-parent demo

# Unit tests run with network sockets disabled (they must pass offline); integration tests may
# start local servers (Chroma, PostgreSQL via GATED_PARENT_POSTGRES_URL) and run the CLI.
test: venv
	$(BIN)/python -m pytest tests/unit_tests --disable-socket --allow-unix-socket --durations=5
	$(BIN)/python -m pytest tests/integration_tests --durations=10

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy langchain_gated_parent benchmarks

bench: venv
	$(BIN)/python -m benchmarks.qasper --data $(QASPER) --setting paper --out bench-out/paper
	$(BIN)/python -m benchmarks.qasper --data $(QASPER) --setting corpus --out bench-out/corpus
