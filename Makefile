# One command sets up and runs each job; every target creates .venv when missing.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
# two workers (this is a 2-core machine); each notebook and each test file stays on one worker
PYTEST_ARGS ?= -n 2 --dist loadfile

.PHONY: setup test lab demo bench fuzz chromium docs notebooks screenshots clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[jupyter,test,bench,dask,distributed]'
	@# PyTorch is the oracle, never a dependency: only the exact CPU release (a plain `torch`
	@# would pull a CUDA build of several GB); without it the oracle tests skip
	$(BIN)/python -m pip install -q torch==2.13.0 \
	  || echo "note: torch 2.13.0 (CPU) is not available here; the PyTorch oracle tests will skip"
	@rm -f $(VENV)/.installed-* && touch $@

# Debian's Chromium for the browser test (Playwright drives it; no browser download).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	      || echo "warning: could not install chromium; the browser test will skip"; \
	  else echo "note: chromium is missing; install it (sudo apt-get install chromium) to run the browser test"; fi; }

test: $(STAMP) chromium
	$(BIN)/python -m pytest --nbval --nbval-sanitize-with notebooks/nbval_sanitize.cfg $(PYTEST_ARGS)

lab: $(STAMP)
	$(BIN)/jupyter lab notebooks/

demo: $(STAMP)
	$(BIN)/python -m nbaccel.demo

bench: $(STAMP)
	$(BIN)/python -m bench.run

fuzz: $(STAMP)
	NBACCEL_FUZZ_EXAMPLES=10000 $(BIN)/python -m pytest -m fuzz tests -p no:randomly

# re-execute the tutorials and save their outputs the way nbval checks them: stable report
# text (no timings, no machine paths) and no stored widget state (reopened notebooks show the
# static HTML report)
notebooks: $(STAMP)
	cd notebooks && for nb in *.ipynb; do \
	  NBACCEL_STABLE_OUTPUT=1 ../$(BIN)/jupyter nbconvert --to notebook --execute --inplace \
	    --ExecutePreprocessor.store_widget_state=False $$nb || exit 1; done

# refresh the README's widget screenshots in docs/img (the browser test, writing where the docs look)
screenshots: $(STAMP) chromium
	NBACCEL_REFRESH_SCREENSHOTS=1 $(BIN)/python -m pytest tests/browser -p no:randomly -q

docs: $(STAMP)
	$(BIN)/python -m nbaccel.docgen docs/supported-ops.md

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
