# Everything a fresh clone needs: `make demo`, `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test soak test-deploy venv clean sanitize fuzz

venv: $(STAMP)

$(STAMP): pyproject.toml setup.py $(wildcard native/*.c native/*.h)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/run.py add_sub

# curl: the OpenAI endpoint's raw event stream is checked with `curl -N` (tests/functional/test_openai.py).
NEED_CURL := command -v curl >/dev/null || apt-get install -y curl || (apt-get update && apt-get install -y curl)

test: $(STAMP)
	@$(NEED_CURL)
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
	rm -rf $(VENV) build *.egg-info .pytest_cache pytriton_like/relay/*.so pytriton_like/server/reaper_wait
	$(MAKE) -C native clean

# The relay's backend, the token-hiding library and the reaper's waiting program built with
# AddressSanitizer and UBSan, and the functional and integration tests run on them (tritonserver
# is not instrumented: the sanitizer runtime is preloaded into every process of the run). The
# plain build is restored afterwards.
# Deselected: with the runtime preloaded, a tritonserver that fails before serving hangs in
# exit() (a bundled library's destructor, libp11-kit, waits for glibc's locale lock), so the test
# of a failing start would see a timeout instead of the exit it checks; no model is loaded there.
SANITIZE_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g -O1
# The native libraries and program, built in place of the installed ones (the package is installed editable).
NATIVE_OUTPUTS := OUT=../pytriton_like/relay/libtriton_pytriton_like.so \
	HIDE_TOKEN_OUT=../pytriton_like/relay/libpytriton_like_hide_token.so \
	REAPER_WAIT_OUT=../pytriton_like/server/reaper_wait
sanitize: $(STAMP)
	$(MAKE) -B -C native $(NATIVE_OUTPUTS) EXTRA_CFLAGS="$(SANITIZE_FLAGS)"
	LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libubsan.so)" \
		ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
		$(BIN)/python -m pytest tests/functional tests/integration -p no:cacheprovider -q \
		--deselect tests/functional/test_lifecycle.py::test_a_server_that_exits_while_starting_says_why; \
		status=$$?; $(MAKE) -B -C native $(NATIVE_OUTPUTS) && exit $$status

# libFuzzer on the backend's decoder of the worker's answers, FUZZ_SECONDS long (default 120).
FUZZ_CORPUS ?= /tmp/pytriton_like-fuzz-corpus
fuzz: $(STAMP)
	command -v clang >/dev/null || apt-get install -y clang || (apt-get update && apt-get install -y clang)
	$(BIN)/python native/fuzz_seeds.py $(FUZZ_CORPUS)
	$(MAKE) -C native fuzz FUZZ_CORPUS=$(FUZZ_CORPUS)

# Benchmark against NVIDIA PyTriton and the two floors (docs/performance.md); wrk, perf_analyzer, matplotlib.
.PHONY: bench bench-quick
BENCH_STAMP := $(VENV)/.bench-stamp
NEED_WRK := command -v wrk >/dev/null || apt-get install -y wrk || (apt-get update && apt-get install -y wrk)

PERF_ANALYZER := $(VENV)/perf_analyzer/perf_analyzer
NEED_B64 := ldconfig -p | grep -q libb64.so.0d || apt-get install -y libb64-0d || (apt-get update && apt-get install -y libb64-0d)

$(BENCH_STAMP): $(STAMP) bench/requirements.txt
	$(BIN)/python -m pip install --quiet -r bench/requirements.txt
	touch $(BENCH_STAMP)

# Triton's perf_analyzer (the tritonclient 2.40.0 wheel ships the last one; bench/install_perf_analyzer.py).
$(PERF_ANALYZER): $(STAMP)
	@$(NEED_B64)
	$(BIN)/python bench/install_perf_analyzer.py

bench: $(BENCH_STAMP) $(PERF_ANALYZER)
	@$(NEED_WRK)
	$(BIN)/python bench/run.py

# One 1 GiB request in and out over HTTP and gRPC: the serving processes' peak memory and whether
# the relay's arenas shrink back after it (bench/big_tensor.py, docs/performance.md).
.PHONY: bench-big
bench-big: $(STAMP)
	$(BIN)/python bench/big_tensor.py

bench-quick: $(BENCH_STAMP) $(PERF_ANALYZER)
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
