# Two commands from a fresh clone: `make demo` (main job, built-in data, no network) and `make test`.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test bench venv clean

venv: $(STAMP)

$(STAMP): requirements.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	@touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q tests

demo: $(STAMP)
	$(PY) train.py --config configs/synthetic/base.yaml --run-dir runs/demo/sinusoidal --overwrite

bench: $(STAMP)
	$(PY) -m bench.run --out runs/bench

clean:
	rm -rf runs/cache
