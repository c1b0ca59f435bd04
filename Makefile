# Two commands from a fresh clone: `make demo` (main job, built-in data, no network) and `make test`.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test bench gpu-check reproduce-multi30k multi30k-table reproduce-iwslt2017 venv clean

venv: $(STAMP)

$(STAMP): requirements.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	@touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q tests

demo: $(STAMP)
	$(PY) -m studies demo

reproduce-multi30k: $(STAMP)
	$(PY) -m studies multi30k

# The Multi30k table again from report/multi30k/ alone (the archived runs; no training, no data).
multi30k-table: $(STAMP)
	$(PY) -m studies multi30k --table

reproduce-iwslt2017: $(STAMP)
	$(PY) -m studies iwslt2017 --device cuda

bench: $(STAMP)
	$(PY) -m bench.run --out runs/bench

# Transformer-base per scheme on the device (CUDA when present): trains, checks, prints speed.
gpu-check: $(STAMP)
	$(PY) -m bench.gpu_check

clean:
	rm -rf runs/cache
