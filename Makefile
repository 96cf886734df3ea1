# Everything a fresh clone needs: `make demo`, `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test soak test-deploy venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/run.py add_sub

test: $(STAMP)
	$(BIN)/python -m pytest

# 60 s of 32 clients against a real server (tests/soak); results in tests/soak/results/latest.json.
soak: $(STAMP)
	$(BIN)/python -m pytest tests/soak -m soak -s -q

# Three replicas behind HAProxy (Debian's package, installed here), each restarted under load and
# one SIGKILLed; the container's entrypoint under tini; the Dockerfile and Kubernetes checks.
# Results in tests/deploy/results/latest.json (docs/deployment.md).
NEED_DEPLOY := (command -v haproxy && command -v tini) >/dev/null || apt-get install -y haproxy tini \
	|| (apt-get update && apt-get install -y haproxy tini)

test-deploy: $(STAMP)
	@$(NEED_DEPLOY)
	$(BIN)/python -m pytest tests/deploy -m "deploy or not deploy" -s -q

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache

# Benchmark against NVIDIA PyTriton and the floor (docs/performance.md); needs wrk and matplotlib.
.PHONY: bench bench-quick
BENCH_STAMP := $(VENV)/.bench-stamp
NEED_WRK := command -v wrk >/dev/null || apt-get install -y wrk || (apt-get update && apt-get install -y wrk)

$(BENCH_STAMP): $(STAMP) bench/requirements.txt
	$(BIN)/python -m pip install --quiet -r bench/requirements.txt
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	@$(NEED_WRK)
	$(BIN)/python bench/run.py

bench-quick: $(BENCH_STAMP)
	@$(NEED_WRK)
	$(BIN)/python bench/run.py --quick

# PyTriton 0.7.0's own tests against PyTriton and against pytriton_like (docs/moving_from_pytriton.md).
# Needs a checkout of triton-inference-server/pytriton at v0.7.0 (not part of this repository):
#   make pytriton-tests PYTRITON_UPSTREAM=/path/to/pytriton [SUITE=unit|l0|examples|all]
.PHONY: pytriton-tests
PYTRITON_UPSTREAM ?= /tmp/pytriton-upstream
SUITE ?= all
pytriton-tests: $(STAMP)
	$(BIN)/python tools/run_pytriton_tests.py --upstream $(PYTRITON_UPSTREAM) --suite $(SUITE)
