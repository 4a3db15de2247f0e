# dumpfilter: every target does its own set-up on a fresh machine.
#   make demo   run the main job (dumpfilter simulate --verify) on the built-in default
#   make test   run every test (unit, property, gRPC, Spark, real MariaDB)
#   make bench  run the benchmarks (ratios against same-process baselines)
#   make fuzz   fuzz the compiled core's scanner for FUZZ_SECONDS (cargo fuzz)

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
STAMP  := $(VENV)/.installed
# The compiled core (core/, Rust): rebuilt by pip whenever its sources change.
CORE_SRC   := $(wildcard core/Cargo.toml core/Cargo.lock core/src/*.rs)
CORE_STAMP := $(VENV)/.core-built
export PATH := $(HOME)/.cargo/bin:$(PATH)
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PACKAGES := mariadb-server mariadb-client

.PHONY: demo test test-fast bench fuzz setup system-deps proto bytecode clean

setup: $(STAMP) $(CORE_STAMP) proto bytecode

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e '.[test]'
	touch $(STAMP) $(CORE_STAMP)

$(CORE_STAMP): $(STAMP) $(CORE_SRC)
	$(PIP) install --quiet --no-deps -e .
	touch $(CORE_STAMP)

proto: $(STAMP)
	@$(PY) proto/generate.py --if-stale

# The source tree's bytecode (the editable install runs it in place; a wheel's install writes it):
# compileall writes it even under PYTHONDONTWRITEBYTECODE, where every command would otherwise
# compile its modules again (about 0.13 s of a slave's start). Stale files are only rewritten.
bytecode: proto
	@$(PY) -m compileall -q -j 0 dumpfilter master slave cli lab spark_jobs

# MariaDB (real servers in tests) and a Java runtime (Spark), from the system's packages.
system-deps:
	@missing=""; \
	command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || missing="$(APT_PACKAGES)"; \
	command -v java >/dev/null 2>&1 || missing="$$missing default-jre-headless"; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >/dev/null; \
	fi

demo: setup
	$(VENV)/bin/dumpfilter simulate --verify

test: setup system-deps
	cd core && cargo test --release --quiet
	PATH="/usr/sbin:$$PATH" $(VENV)/bin/pytest -q

test-fast: setup
	$(VENV)/bin/pytest -q -m "not mariadb and not spark"

bench: setup system-deps
	$(PIP) install --quiet -e '.[test,bench]'
	@command -v sysbench >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  $(SUDO) apt-get install -y -qq sysbench >/dev/null; } || echo "no sysbench: bench load uses its own writer"
	PATH="/usr/sbin:$$PATH" $(PY) -m bench

# The compiled core's cargo fuzz target, for FUZZ_SECONDS (cargo-fuzz needs nightly features:
# RUSTC_BOOTSTRAP lets the one stable toolchain here build them).
FUZZ_SECONDS ?= 60
fuzz:
	command -v cargo-fuzz >/dev/null 2>&1 || cargo install --locked cargo-fuzz
	cd core && RUSTC_BOOTSTRAP=1 cargo fuzz run scan -- -max_total_time=$(FUZZ_SECONDS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache out bench/data bench/results
