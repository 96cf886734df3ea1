# Everything a fresh clone needs: `make demo`, `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# A second environment with numpy 1.26 (and NVIDIA's PyTriton, whose signatures a test compares):
# `make test` runs the whole suite on numpy 2 in .venv, then NUMPY1_TESTS here.
VENV_NUMPY1 := .venv-numpy1
STAMP_NUMPY1 := $(VENV_NUMPY1)/.installed-stamp
NUMPY1_TESTS := tests/unit tests/integration \
	tests/functional/test_callables.py tests/functional/test_dtypes.py tests/functional/test_outputs.py \
	tests/functional/test_client_api.py tests/functional/test_runner.py \
	tests/functional/test_model_repository.py tests/functional/test_model_management.py \
	tests/functional/test_s3_repository.py tests/functional/test_triton_home.py \
	tests/functional/test_examples.py::test_model_repository_serves_a_hand_written_model_and_two_versions \
	tests/functional/test_examples.py::test_s3_repository_served_from_a_stand_in_s3_server \
	tests/functional/test_nested_calls.py::test_models_of_the_users_repository_are_called_and_streamed

.PHONY: demo test venv venv-numpy1 test-numpy1 dist smoke-pythons soak test-deploy clean sanitize fuzz docs

venv: $(STAMP)
venv-numpy1: $(STAMP_NUMPY1)

# What the build reads: a change to any of it rebuilds the venvs' editable installs.
BUILD_INPUTS := pyproject.toml setup.py $(wildcard build_support/*.py native/*.c native/*.h native/flags.mk)
# The project's own builds make the C compiler's warnings errors (native/flags.mk); a user's
# `pip install` does not.
STRICT_BUILD := PYTRITON_LIKE_WERROR=1

$(STAMP): $(BUILD_INPUTS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(STRICT_BUILD) $(BIN)/python -m pip install --quiet -e ".[test]" "numpy>=2"
	touch $(STAMP)

$(STAMP_NUMPY1): $(BUILD_INPUTS)
	test -x $(VENV_NUMPY1)/bin/python || $(PYTHON) -m venv $(VENV_NUMPY1)
	$(VENV_NUMPY1)/bin/python -m pip install --quiet --upgrade pip
	$(STRICT_BUILD) $(VENV_NUMPY1)/bin/python -m pip install --quiet -e ".[test]" "numpy>=1.26,<2" "nvidia-pytriton==0.7.0"
	touch $(STAMP_NUMPY1)

demo: $(STAMP)
	$(BIN)/python examples/run.py add_sub

# The documentation site (mkdocs.yml): docs/ and the API reference from the docstrings, built with
# --strict (a broken link, anchor or reference fails it) into site/; open site/index.html. The
# tools (pyproject.toml's docs extra) come with the test extra, which `make venv` installs.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --site-dir site

# The framework examples (docs/examples.md) with PyTorch too: scikit-learn and ONNX Runtime come with
# the test extra (`make venv`); this adds PyTorch's CPU build to .venv and runs the three examples'
# tests. TORCH_SPEC names the CPU build (+cpu), so pip never takes a CUDA build of several GB instead:
# where your index lacks it, TORCH_PIP_ARGS="--extra-index-url https://download.pytorch.org/whl/cpu".
TORCH_SPEC ?= torch==2.13.0+cpu
TORCH_PIP_ARGS ?=
.PHONY: examples-frameworks
examples-frameworks: $(STAMP)
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install --quiet $(TORCH_PIP_ARGS) "$(TORCH_SPEC)"
	$(BIN)/python -m pytest -q tests/functional/test_examples.py -k "sklearn or onnxruntime or pytorch"

# curl: the OpenAI endpoint's raw event stream is checked with `curl -N` (tests/functional/test_openai.py).
NEED_CURL := command -v curl >/dev/null || apt-get install -y curl || (apt-get update && apt-get install -y curl)
# chromium: `pytriton_like tune`'s HTML report is loaded in a headless browser, its plots checked as drawn
# (tests/functional/test_tune.py).
NEED_CHROMIUM := command -v chromium >/dev/null || apt-get install -y chromium \
	|| (apt-get update && apt-get install -y chromium)

# The suite runs in two processes (pytest-xdist; the CHANGELOG has what it saves). The tests marked
# `alone` measure speed or need the cores free: they run after the rest, by themselves.
test: $(STAMP) $(STAMP_NUMPY1)
	@$(NEED_CURL)
	@$(NEED_CHROMIUM)
	$(BIN)/python -m pytest -n 2 -m "not soak and not deploy and not alone"
	$(BIN)/python -m pytest -m alone tests/functional
	$(MAKE) --no-print-directory test-numpy1

test-numpy1: $(STAMP_NUMPY1)
	$(VENV_NUMPY1)/bin/python -m pytest -p no:cacheprovider -n 2 $(NUMPY1_TESTS)

# The release: dist/ gets the sdist and the manylinux wheels for x86_64 and aarch64 (the latter
# cross-compiled with Debian's gcc-aarch64-linux-gnu, installed here), each checked with
# `auditwheel show` (its tag is the one the files allow) and `twine check` (tools/dist.py).
DIST_TOOLS := $(VENV)/.dist-tools-stamp
CROSS_PACKAGES := gcc-aarch64-linux-gnu libc6-dev-arm64-cross
NEED_CROSS := dpkg -s $(CROSS_PACKAGES) >/dev/null 2>&1 || apt-get install -y $(CROSS_PACKAGES) \
	|| (apt-get update && apt-get install -y $(CROSS_PACKAGES))

$(DIST_TOOLS): $(STAMP)
	$(BIN)/python -m pip install --quiet "build>=1.2" "auditwheel>=6.4" "twine>=6.1"
	touch $(DIST_TOOLS)

dist: $(DIST_TOOLS)
	@$(NEED_CROSS)
	$(BIN)/python tools/dist.py

# The aarch64 wheel of dist/ served under qemu-user on this x86_64 machine: its tritonserver and
# relay backend, a model called over HTTP and gRPC (tools/smoke_aarch64.py; it fetches Debian's
# aarch64 zlib with apt-get into a folder of its own).
QEMU_PACKAGES := qemu-user libstdc++6-arm64-cross
NEED_QEMU := dpkg -s $(QEMU_PACKAGES) >/dev/null 2>&1 || apt-get install -y $(QEMU_PACKAGES) \
	|| (apt-get update && apt-get install -y $(QEMU_PACKAGES))
.PHONY: smoke-aarch64
smoke-aarch64: dist
	@$(NEED_QEMU)
	$(BIN)/python tools/smoke_aarch64.py

# pytriton_like's sdist and wheel built once; into a fresh venv of every Python of requires-python
# (pyenv's), the wheel installed from wheels alone (pip --only-binary :all:, no compiler on PATH),
# and the sdist built and installed with no index but a local wheelhouse (PYTRITON_LIKE_TRITON_WHEEL
# naming NVIDIA's wheel there); each served: a model called over HTTP and gRPC, then stopped
# (tools/smoke_pythons.py). Not part of `make test`: it takes minutes.
SMOKE_PYTHONS ?= 3.9 3.10 3.11 3.12 3.13
smoke-pythons: $(DIST_TOOLS)
	$(BIN)/python tools/smoke_pythons.py $(SMOKE_PYTHONS)

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
	rm -rf $(VENV) $(VENV_NUMPY1) $(VENV_PEERS) build dist site pytriton_like/tritonserver *.egg-info .pytest_cache pytriton_like/relay/*.so pytriton_like/server/reaper_wait pytriton_like/server/pdeathsig_exec
	$(MAKE) -C native clean

# The relay's backend, the token-hiding library, the reaper's waiting program and the launcher
# built with AddressSanitizer and UBSan, and the functional and integration tests run on them
# (tritonserver is not instrumented: the sanitizer runtime is preloaded into every process of the
# run). The plain build is restored afterwards.
# Deselected: with the runtime preloaded, a tritonserver that fails before serving hangs in
# exit() (a bundled library's destructor, libp11-kit, waits for glibc's locale lock), so the test
# of a failing start would see a timeout instead of the exit it checks; no model is loaded there.
# Also deselected: curl itself hangs with the runtime preloaded (even against a closed port, no
# server involved), so the tests running curl (the OpenAI endpoint's, clients.md's) cannot run here;
# so does headless Chromium (the tune report's browser test). And the tests whose verdict is a
# measurement the runtime changes: ASan's allocator replaces glibc's malloc in tritonserver, so
# the malloc settings that keep a tensor's pages (the page-fault tests) do not apply; and `tune`'s
# trials time the callable under the instrumented runtime, where the recommendation its tests
# check (a queue delay for the sleeping callable) no longer wins.
SANITIZE_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g -O1
# The native libraries and programs, built in place of the installed ones (the package is installed editable).
NATIVE_OUTPUTS := OUT=../pytriton_like/relay/libtriton_pytriton_like.so \
	HIDE_TOKEN_OUT=../pytriton_like/relay/libpytriton_like_hide_token.so \
	REAPER_WAIT_OUT=../pytriton_like/server/reaper_wait \
	PDEATHSIG_EXEC_OUT=../pytriton_like/server/pdeathsig_exec
sanitize: $(STAMP)
	$(MAKE) -B -C native $(NATIVE_OUTPUTS) EXTRA_CFLAGS="$(SANITIZE_FLAGS)"
	LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libubsan.so)" \
		ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
		$(BIN)/python -m pytest tests/functional tests/integration -p no:cacheprovider -q \
		--deselect tests/functional/test_lifecycle.py::test_a_server_that_exits_while_starting_says_why \
		--deselect tests/functional/test_openai.py::test_curl_sees_server_sent_events_ending_with_done \
		--deselect "tests/functional/test_docs.py::test_the_page_runs_as_written[clients.md]" \
		--deselect tests/functional/test_tune.py::test_the_html_report_draws_its_plots_in_a_browser \
		--deselect tests/functional/test_large_tensors.py::test_tritonserver_keeps_a_tensors_pages_for_the_next_request \
		--deselect tests/functional/test_tune.py::test_the_sleeping_callable_batches_with_a_delay_far_faster_than_given \
		--deselect tests/functional/test_tune.py::test_the_report_lists_every_trial_and_the_terminal_says_how_to_apply_it \
		--deselect tests/functional/test_tune.py::test_the_recommendation_served_again_serves_batches \
		--deselect tests/functional/test_examples.py::test_tuning_finds_the_batching_and_serve_uses_it; \
		status=$$?; $(MAKE) -B -C native $(NATIVE_OUTPUTS) && exit $$status

# libFuzzer on the backend's decoder of the relay server's answers, FUZZ_SECONDS long (default 120).
FUZZ_CORPUS ?= /tmp/pytriton_like-fuzz-corpus
fuzz: $(STAMP)
	command -v clang >/dev/null || apt-get install -y clang || (apt-get update && apt-get install -y clang)
	$(BIN)/python native/fuzz_seeds.py $(FUZZ_CORPUS)
	$(MAKE) -C native fuzz FUZZ_CORPUS=$(FUZZ_CORPUS)

# Benchmark against NVIDIA PyTriton and the two floors (docs/performance.md); wrk, perf_analyzer, matplotlib.
.PHONY: bench bench-quick
# In the numpy 1 environment: the benchmark serves NVIDIA's PyTriton too (nvidia-pytriton pins numpy<2).
BENCH_STAMP := $(VENV_NUMPY1)/.bench-stamp
NEED_WRK := command -v wrk >/dev/null || apt-get install -y wrk || (apt-get update && apt-get install -y wrk)

PERF_ANALYZER := $(VENV)/perf_analyzer/perf_analyzer
NEED_B64 := ldconfig -p | grep -q libb64.so.0d || apt-get install -y libb64-0d || (apt-get update && apt-get install -y libb64-0d)

$(BENCH_STAMP): $(STAMP_NUMPY1) bench/requirements.txt
	$(VENV_NUMPY1)/bin/python -m pip install --quiet -r bench/requirements.txt
	touch $(BENCH_STAMP)

# Triton's perf_analyzer (the tritonclient 2.40.0 wheel ships the last one; bench/install_perf_analyzer.py).
$(PERF_ANALYZER): $(STAMP) $(STAMP_NUMPY1)
	@$(NEED_B64)
	$(VENV_NUMPY1)/bin/python bench/install_perf_analyzer.py

bench: $(BENCH_STAMP) $(PERF_ANALYZER)
	@$(NEED_WRK)
	$(VENV_NUMPY1)/bin/python bench/run.py $(ARGS)

# Worker processes against threads and Triton's Python backend on a CPU-bound model, and the memory
# each worker adds with fork and spawn (bench/workers.py, docs/workers.md).
.PHONY: bench-workers
bench-workers: $(BENCH_STAMP) $(PERF_ANALYZER)
	$(VENV_NUMPY1)/bin/python bench/workers.py $(ARGS)

# One 1 GiB request in and out over HTTP and gRPC: the serving processes' peak memory and whether
# the relay's arenas shrink back after it (bench/big_tensor.py, docs/performance.md).
.PHONY: bench-big
bench-big: $(STAMP)
	$(BIN)/python bench/big_tensor.py $(ARGS)

# tritonserver with glibc's malloc defaults against pytriton_like's settings (MALLOC_TUNABLES), side
# by side: p50 at c1, throughput at c8 and page faults a request for 1, 4 and 16 MiB over HTTP and gRPC,
# and what tritonserver holds when idle (bench/malloc_reuse.py, docs/performance.md). About 9 minutes.
.PHONY: bench-malloc
bench-malloc: $(STAMP) $(PERF_ANALYZER)
	$(BIN)/python bench/malloc_reuse.py $(ARGS)

# Client tensors through registered shared memory against the socket, 16 and 256 MiB in and out,
# HTTP and gRPC (bench/shm_client.py, docs/performance.md): a minute or two.
.PHONY: bench-shm
bench-shm: $(STAMP)
	$(BIN)/python bench/shm_client.py $(ARGS)

# What each serving process holds at idle, PyTriton and pytriton_like (bench/idle_memory.py), in the
# numpy 1 environment, which has NVIDIA's PyTriton: half a minute.
.PHONY: bench-idle
bench-idle: $(STAMP_NUMPY1)
	$(VENV_NUMPY1)/bin/python bench/idle_memory.py $(ARGS)

bench-quick: $(BENCH_STAMP) $(PERF_ANALYZER)
	@$(NEED_WRK)
	$(VENV_NUMPY1)/bin/python bench/run.py --quick

# A/B of pytriton_like variants (a setting, another commit's package) next to the floors, alternating
# (bench/ab.py; in .venv-numpy1, whose nvidia-pytriton has the floors' Triton). perf_analyzer, or wrk:
#   make bench-ab ARGS="--variant base --variant spin:PYTRITON_TRITON_CONFIG_RELAY_SPIN_US=100 --variant floor"
#   make bench-ab ARGS="--tool wrk --concurrency 32 --variant base --variant floor"
.PHONY: bench-ab
bench-ab: $(BENCH_STAMP) $(PERF_ANALYZER)
	@$(NEED_WRK)
	$(VENV_NUMPY1)/bin/python bench/ab.py $(or $(ARGS),--variant pytriton_like --variant floor)

# Nested calls against Triton's Python-backend BLS and the network path they took before
# (bench/nested.py, docs/pipelines.md): 16 floats and 1 MiB, gRPC and HTTP, c1 p50 and c8
# throughput, with the ratios to BLS and the called model alone (the bound). In .venv-numpy1: the BLS model
# runs in Triton's stub. About 15 min.
.PHONY: bench-nested
bench-nested: $(BENCH_STAMP) $(PERF_ANALYZER)
	$(VENV_NUMPY1)/bin/python bench/nested.py $(ARGS)

# A PyTorch network on CUDA in worker processes, one GPU each (WorkerOptions(devices=...)), called
# directly and through a nested call (bench/gpu_workers.py). Needs an NVIDIA GPU and PyTorch built with
# CUDA in .venv (pip install torch); CI has neither, and nothing depends on it. ARGS="--device cpu" runs
# the same on the CPU. About a minute.
.PHONY: bench-gpu
bench-gpu: $(STAMP)
	$(BIN)/python bench/gpu_workers.py $(ARGS)

# What a KVM guest's idle policy does to serving and to nested calls against BLS (bench/idle_polling.py):
# make bench-nested's measurements with cpuidle haltpoll's guest_halt_poll_ns at 0 and at 200000, in
# turns; the setting is put back at the end. Needs root and a guest with that driver. About 10 minutes.
.PHONY: bench-idle-polling
bench-idle-polling: $(BENCH_STAMP) $(PERF_ANALYZER)
	$(VENV_NUMPY1)/bin/python bench/idle_polling.py $(ARGS)

# Where a nested call's time goes inside a running server (bench/nested_split.py): the caller's
# parts, the called model's time in Triton's core, the outer model's relay hop; then a loop of
# nested calls against BLS, as the system places the processes and pinned to one CPU. 16 floats
# and 1 MiB. In .venv-numpy1 (the BLS model runs in Triton's stub). About 2 minutes.
.PHONY: bench-nested-split
bench-nested-split: $(BENCH_STAMP)
	$(VENV_NUMPY1)/bin/python bench/nested_split.py $(ARGS)

# Where each request's CPU goes, by process and kind of work (copies, page faults, the interpreter...),
# for a nested call through the relay, BLS and the called model alone (bench/nested_profile.py): a
# system-wide `perf record` while perf_analyzer drives each. 1 MiB over HTTP at c1 by default. Needs
# root (perf sees every process); installs linux-perf. About a minute.
NEED_PERF := command -v perf >/dev/null || apt-get install -y linux-perf || (apt-get update && apt-get install -y linux-perf)
.PHONY: bench-nested-profile
bench-nested-profile: $(BENCH_STAMP) $(PERF_ANALYZER)
	@$(NEED_PERF)
	$(VENV_NUMPY1)/bin/python bench/nested_profile.py $(ARGS)

# `pytriton_like tune` on callables whose best settings are known (bench/tune_known.py, docs/tuning.md): each
# tuned with the default search, then its recommendation and its given settings served again to wrk (a
# client of its own). About 12 minutes. ARGS="generator": tune's load generator against perf_analyzer
# (make bench installs it); ARGS="screenshot DIR PNG": a report as headless Chromium draws it.
.PHONY: bench-tune
bench-tune: $(STAMP)
	@$(NEED_WRK)
	$(BIN)/python bench/tune_known.py $(ARGS)

# What the relay costs (bench/relay.py): the worker's Python per batch in a loop, its CPU per batch
# through the real socket, a tiny request's time per phase in a server. Under a minute.
#   make bench-relay ARGS="loop --profile"
.PHONY: bench-relay
bench-relay: $(STAMP)
	$(if $(ARGS),$(BIN)/python bench/relay.py $(ARGS),$(BIN)/python bench/relay.py loop && \
		$(BIN)/python bench/relay.py socket && $(BIN)/python bench/relay.py server)

# The OpenAI endpoint (bench/openai_endpoint.py): `latency` against Triton's gRPC stream (the default),
# `cpu openai|grpc` (CPU per streamed piece of each process), `stress` (streams, some cut, counted):
#   make bench-openai ARGS="stress --runs 5 --seconds 10 --cut 0.3"
.PHONY: bench-openai
bench-openai: $(STAMP)
	$(BIN)/python bench/openai_endpoint.py $(or $(ARGS),latency)

# Trying to break the server (bench/reliability.py, docs/reliability.md): cancel storms through the
# OpenAI endpoint and over raw gRPC, expiring deadlines (in the queue, and just as calls complete: that
# one crashes tritonserver 2.51 now and then, docs/known_issues.md), nested calls timed out, left early
# and cancelled, tritonserver / the endpoint / a worker killed; prints restarts, outages (seconds to
# serve again) and the share of time served (the 60 s gRPC storm: at least 90 % of 100 ms slots
# expected, docs/reliability.md). The default, all of them once, takes about 9 minutes:
#   make bench-reliability ARGS="storm grpc --seconds 60"
.PHONY: bench-reliability
bench-reliability: $(STAMP)
	$(if $(ARGS),$(BIN)/python bench/reliability.py $(ARGS),$(BIN)/python bench/reliability.py storm endpoint && \
		$(BIN)/python bench/reliability.py storm grpc --seconds 60 && $(BIN)/python bench/reliability.py storm deadlines && \
		$(BIN)/python bench/reliability.py storm deadlines --seconds 60 --clients 8 --deadline-ms 15 45 && \
		$(BIN)/python bench/reliability.py storm nested --seconds 60 --clients 64 --cut 0.5 && \
		$(BIN)/python bench/reliability.py kill tritonserver && $(BIN)/python bench/reliability.py kill endpoint && \
		$(BIN)/python bench/reliability.py kill worker)

# pytriton_like against LitServe and Ray Serve on the same workloads, one server at a time (bench/peers.py,
# docs/performance.md): tiny requests, a CPU-bound callable in 1 and 2 processes, OpenAI-style streams.
# The peers, pinned in bench/requirements-peers.txt, go into an environment of their own, .venv-peers.
# Full run about 7 minutes (results in bench/results/peers.jsonl); bench-peers-quick about 3.
.PHONY: bench-peers bench-peers-quick
VENV_PEERS := .venv-peers
STAMP_PEERS := $(VENV_PEERS)/.installed-stamp

$(STAMP_PEERS): bench/requirements-peers.txt
	test -x $(VENV_PEERS)/bin/python || $(PYTHON) -m venv $(VENV_PEERS)
	$(VENV_PEERS)/bin/python -m pip install --quiet --upgrade pip
	$(VENV_PEERS)/bin/python -m pip install --quiet -r bench/requirements-peers.txt
	touch $(STAMP_PEERS)

bench-peers: $(STAMP) $(STAMP_PEERS)
	@$(NEED_WRK)
	$(BIN)/python bench/peers.py $(ARGS)

bench-peers-quick: $(STAMP) $(STAMP_PEERS)
	@$(NEED_WRK)
	$(BIN)/python bench/peers.py --quick $(ARGS)

# PyTriton 0.7.0's own tests against PyTriton and against pytriton_like (docs/moving_from_pytriton.md),
# in the numpy 1 environment, which has NVIDIA's nvidia-pytriton installed (it pins numpy<2).
# Needs a checkout of triton-inference-server/pytriton at v0.7.0 (not part of this repository):
#   make pytriton-tests PYTRITON_UPSTREAM=/path/to/pytriton [SUITE=unit|l0|examples|all]
.PHONY: pytriton-tests
PYTRITON_UPSTREAM ?= /tmp/pytriton-upstream
SUITE ?= all
pytriton-tests: $(STAMP_NUMPY1)
	$(VENV_NUMPY1)/bin/python tools/run_pytriton_tests.py --upstream $(PYTRITON_UPSTREAM) --suite $(SUITE)
