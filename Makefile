# dumpfilter: every target does its own set-up on a fresh machine.
#   make demo   run the main job (dumpfilter simulate --verify) on the built-in default (LISTEN=, DEMO_ARGS=)
#   make test   run the checks (make lint), then every test (unit, property, gRPC, Spark, real MariaDB)
#   make lint   ruff, mypy (strict on every package), stubtest (_core.pyi against the built core),
#               the stub against what the Rust generates, cargo clippy -D warnings
#   make stubs  write dumpfilter/_core.pyi from the core's Rust (pyo3-stub-gen), stamped in core/stubs.stamp
#   make bench  run the benchmarks (ratios against same-process baselines)
#   make fuzz   fuzz the compiled core's scanner for FUZZ_SECONDS (cargo fuzz)

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
STAMP  := $(VENV)/.installed
# The compiled core (core/, Rust): rebuilt by `python -m pip` (as the wheel check: one PYO3_PYTHON) when its sources change.
CORE_SRC   := $(wildcard core/Cargo.toml core/Cargo.lock core/src/*.rs core/src/*/*.rs)
CORE_STAMP := $(VENV)/.core-built
export PATH := $(HOME)/.cargo/bin:$(PATH)
# setuptools warns at every editable install that the checkout's dumpfilter/ folder is the
# package's name (it is the package): a wall of "!!" on the first `make demo`, about nothing.
export PYTHONWARNINGS := ignore:Editable installation
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: demo test test-rust test-fast lint stubs stub-stamp bench fuzz setup system-deps proto bytecode clean

setup: $(STAMP) $(CORE_STAMP) proto bytecode

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP) $(CORE_STAMP)

$(CORE_STAMP): $(STAMP) $(CORE_SRC)
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(CORE_STAMP)

proto: $(STAMP)
	@$(PY) proto/generate.py --if-stale

# The source tree's bytecode (the editable install runs it in place; a wheel's install writes it):
# compileall writes it even under PYTHONDONTWRITEBYTECODE, where every command would otherwise
# compile its modules again (about 0.13 s of a slave's start). Stale files are only rewritten.
bytecode: proto
	@$(PY) -m compileall -q -j 0 dumpfilter master slave cli lab spark_jobs

# Every program a test runs, each checked on its own (binary:Debian package); only the packages
# of the missing ones are installed. mariadbd and mariadb-install-db: the sandbox's servers;
# mariadb, mariadb-binlog, mariadb-dump: the clients the tests call; java: Spark; chromium: the
# report rendered in a headless browser; openssl: the TLS tests' certificates.
SYSTEM_DEPS := \
	mariadbd:mariadb-server \
	mariadb-install-db:mariadb-server \
	mariadb:mariadb-client \
	mariadb-binlog:mariadb-client \
	mariadb-dump:mariadb-client \
	java:default-jre-headless \
	chromium:chromium \
	openssl:openssl

# Also the venv module of $(PYTHON) (Debian's own python3 needs python3-venv for `make setup`).
# Runs as root without a terminal (CI) or through sudo; apt's lists are fetched only when a
# package is missing. cargo (the compiled core) comes from rustup, not from Debian (too old).
system-deps:
	@export PATH="/usr/sbin:/sbin:$$PATH"; missing=""; \
	for dep in $(SYSTEM_DEPS); do \
	  command -v "$${dep%%:*}" >/dev/null 2>&1 && continue; \
	  case " $$missing " in *" $${dep#*:} "*) ;; *) missing="$$missing $${dep#*:}";; esac; \
	done; \
	$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || missing="$$missing python3-venv"; \
	if [ -n "$$missing" ]; then \
	  echo "system-deps: installing$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq \
	    --no-install-suggests $$missing </dev/null >/dev/null || exit 1; \
	fi; \
	still=""; for dep in $(SYSTEM_DEPS); do command -v "$${dep%%:*}" >/dev/null 2>&1 || still="$$still $${dep%%:*}"; done; \
	$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || still="$$still $(PYTHON)'s venv"; \
	if [ -n "$$still" ]; then echo "system-deps: still missing:$$still" >&2; exit 1; fi; \
	command -v cargo >/dev/null 2>&1 || { echo "system-deps: cargo not found (install Rust with rustup)" >&2; exit 1; }

# LISTEN=HOST:PORT pins the demo master's gRPC address (default: a free port on 127.0.0.1);
# DEMO_ARGS adds any other simulate option (make demo DEMO_ARGS='--topology t.toml --out /tmp/r').
LISTEN    ?=
DEMO_ARGS ?=
demo: setup
	$(VENV)/bin/dumpfilter simulate --verify$(if $(LISTEN), --listen $(LISTEN)) $(DEMO_ARGS)

# The checks (issue #46, "checked habits"): each one runs even when an earlier one failed, and the
# last line names the ones that failed. ruff and mypy come from the test extra (pyproject.toml);
# clippy from rustup (added to the toolchain when it is missing). Both feature sets of the core are
# linted: the pure scanner (cargo test's) and the Python extension with its stub's (`stubs`).
# dumpfilter/_core.pyi is generated from the Rust (issue #80 goal 5): its types and docstrings are
# core/src/python/'s, read by pyo3-stub-gen (feature `stubs`, the stub_gen binary: `make stubs`);
# lint fails when the committed stub is not what the Rust makes. mypy's stubtest then holds it to
# the core `setup` built: every name the module exports, each parameter's name, kind and default,
# classes final at run time, with no allowlist.
STUB_GEN := cd core && PYO3_PYTHON="$(abspath $(PY))" cargo run --quiet --features stubs --bin stub_gen
# The stub's inputs (the core's sources, manifests and lock: the generator reads nothing else) and
# the stub, hashed: `make stubs` records the hash in core/stubs.stamp, and lint builds and runs the
# generator (pyo3-stub-gen and the core: about 110 s of CPU) only when it differs.
STUB_STAMP := cd core && { find src stub-attrs/src Cargo.toml Cargo.lock stub-attrs/Cargo.toml -type f -print0 \
	| LC_ALL=C sort -z | xargs -0 sha256sum; cat ../dumpfilter/_core.pyi; } | sha256sum | cut -d' ' -f1
stubs: setup
	$(STUB_GEN) > ../dumpfilter/_core.pyi.new && mv ../dumpfilter/_core.pyi.new ../dumpfilter/_core.pyi
	($(STUB_STAMP)) > core/stubs.stamp
stub-stamp:  # the hash `make stubs` records in core/stubs.stamp, of the files as they are now
	@$(STUB_STAMP)

lint: setup
	@cargo clippy --version >/dev/null 2>&1 || rustup component add clippy; failed=""; \
	echo "lint: ruff check ."; $(VENV)/bin/ruff check . || failed="$$failed ruff"; \
	echo "lint: mypy (pyproject's [tool.mypy])"; $(VENV)/bin/mypy || failed="$$failed mypy"; \
	echo "lint: stubtest dumpfilter._core (the core's stub against the built module)"; \
	$(PY) -m mypy.stubtest --strict-type-check-only dumpfilter._core || failed="$$failed stubtest"; \
	echo "lint: dumpfilter/_core.pyi is what \`make stubs\` writes"; \
	if [ "$$($(STUB_STAMP))" = "$$(cat core/stubs.stamp 2>/dev/null)" ]; then \
	  echo "lint: (the stub and the core's sources are those \`make stubs\` stamped: core/stubs.stamp)"; \
	else ($(STUB_GEN) | diff -u ../dumpfilter/_core.pyi -) || failed="$$failed stubs"; fi; \
	echo "lint: cargo clippy --workspace --all-targets -- -D warnings"; \
	(cd core && cargo clippy --quiet --workspace --all-targets -- -D warnings) || failed="$$failed clippy"; \
	echo "lint: cargo clippy --all-targets --features stubs -- -D warnings"; \
	(cd core && PYO3_PYTHON="$(abspath $(PY))" cargo clippy --quiet --all-targets --features stubs -- -D warnings) \
	  || failed="$$failed clippy(stubs)"; \
	if [ -n "$$failed" ]; then echo "lint: FAILED:$$failed" >&2; exit 1; fi; \
	echo "lint: ruff, mypy, stubtest, the stub and clippy are clean"

# pytest-xdist workers. Three kept two cores 97% busy where two leave them 88%, but CI's pytest
# took as long (session 92, fresh clones: 1,409 s against 1,398 s): two, the lighter load.
TEST_WORKERS ?= 2
test: system-deps setup lint test-rust
	PATH="/usr/sbin:$$PATH" $(VENV)/bin/pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=20

test-rust:  # cargo test; the Rust client test_third_party_clients.py runs (.ci/run: beside lint, make -j2)
	cd core && cargo test --profile rust-tests --quiet
	cargo build --quiet --manifest-path tests/clients/rust-binlog/Cargo.toml

test-fast: setup
	$(VENV)/bin/pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not mariadb and not spark"

bench: system-deps setup
	$(PIP) install --quiet -e '.[test,bench]'
	@command -v sysbench >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  $(SUDO) apt-get install -y -qq sysbench >/dev/null; } || echo "no sysbench: bench load uses its own writer"
	PATH="/usr/sbin:$$PATH" $(PY) -m bench
	@# experiment against simulate's real streams on binlogs over 500 MB (too slow for CI: tests/large)
	PATH="/usr/sbin:$$PATH" DUMPFILTER_LARGE=1 $(VENV)/bin/pytest -q -p no:cacheprovider tests/large

# The compiled core's cargo fuzz target, for FUZZ_SECONDS (cargo-fuzz needs nightly features:
# RUSTC_BOOTSTRAP lets the one stable toolchain here build them).
FUZZ_SECONDS ?= 60
fuzz:
	command -v cargo-fuzz >/dev/null 2>&1 || cargo install --locked cargo-fuzz
	cd core && RUSTC_BOOTSTRAP=1 cargo fuzz run scan -- -max_total_time=$(FUZZ_SECONDS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache out bench/data bench/results
