# Two commands from a fresh clone: `make demo` (main job, built-in data, no network) and `make test`.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint browser slurm test-isa mutation bench report gpu-check gpu-prep gpu-wave gpu-unpack data tables reproduce-multi30k multi30k-table reproduce-multi30k-best-all multi30k-best-all-table reproduce-iwslt2017 venv clean

venv: $(STAMP)

$(STAMP): requirements.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	@touch $(STAMP)

# The whole suite: the linter and the kernel-set step first (both fail fast), then every test on
# this CPU's own kernels.
test: $(STAMP) lint browser slurm test-isa tables
	$(PY) -m pytest -q tests

# Headless Chromium for the explorer page's browser tests (tests/analysis/test_explorer.py, driven by
# Playwright from requirements.txt): Debian's package, installed once (as root, or through sudo).
CHROMIUM ?= /usr/bin/chromium
export CHROMIUM
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
browser:
	@test -x $(CHROMIUM) || { echo "installing Debian's chromium (headless browser for the page tests)"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium >/dev/null; } \
	  || { echo "error: could not install chromium (apt-get install chromium); set CHROMIUM=/path/to/chromium" >&2; exit 1; }
	@test -x $(CHROMIUM) || { echo "error: no browser at $(CHROMIUM)" >&2; exit 1; }

# SLURM for the cluster tests (tests/studies/test_cluster.py start their own one-node cluster with
# tests/slurm_cluster.py and stop it, daemons and all, at the end): Debian's packages, installed once.
SLURM_PACKAGES := slurmctld slurmd slurm-client slurmdbd munge mariadb-server
slurm:
	@command -v slurmctld >/dev/null && command -v slurmdbd >/dev/null && command -v mariadbd >/dev/null && command -v munged >/dev/null \
	  || { echo "installing Debian's SLURM, munge and MariaDB (a one-node cluster for the tests)"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $(SLURM_PACKAGES) >/dev/null; } \
	  || { echo "error: could not install SLURM (apt-get install $(SLURM_PACKAGES))" >&2; exit 1; }

# ruff (settings in pyproject.toml): pycodestyle, pyflakes, import order, pyupgrade, bugbear.
lint: $(STAMP)
	$(PY) -m ruff check .

# The tests that train and run the commands, again under other CPU kernel sets than this machine's
# own (ATEN_CPU_CAPABILITY: `default` = PyTorch's non-vectorised kernels; `avx2` on x86-64), so a
# test that holds only for one CPU's float rounding fails on every machine, not just on another.
ISA_TESTS := tests/commands/test_commands.py tests/search/test_ctranslate2.py tests/training/test_training.py
ISA_KERNELS := default $(if $(filter x86_64 amd64,$(shell uname -m)),avx2)
test-isa: $(STAMP)
	@set -e; for kernels in $(ISA_KERNELS); do \
	  echo "== ATEN_CPU_CAPABILITY=$$kernels: $(ISA_TESTS)"; \
	  ATEN_CPU_CAPABILITY=$$kernels $(PY) -m pytest -q -p no:cacheprovider $(ISA_TESTS); \
	done

demo: $(STAMP)
	$(PY) -m nmt study demo

# Mutation testing of the science core, each module against its own tests (tests/mutation/):
# writes tests/mutation/score.md; fails on a mutant neither killed nor listed as equivalent.
mutation: $(STAMP)
	$(PY) -m pip install --quiet mutmut==3.8.1
	$(PY) -m tests.mutation

# Every archive under report/ remade from its archived runs by naming its study (`nmt study NAME
# --table`, no training, no data), two studies at a time, then compared byte for byte with the
# tables, CSVs and metric scores the checkout held before (pictures aside: their metadata may
# differ); a table that changed or appeared fails it. The largest archives first (most run folders), so
# that the two at a time end together. `make test` runs it (docs/performance.md: its time).
TABLE_STUDIES = $(PY) -c "from studies.catalog import load_studies; \
	  kept = {n: s.archive for n, s in load_studies().items() if s.archive is not None and s.archive.is_dir()}; \
	  print('\n'.join(sorted(kept, key=lambda n: -sum(1 for _ in kept[n].iterdir()))))"
tables: $(STAMP)
	@set -e; before=$$(mktemp -d); trap 'rm -rf "$$before"' EXIT; cp -r report "$$before/"; \
	  $(TABLE_STUDIES) | xargs -P 2 -I{} sh -c 'echo "== nmt study {} --table"; $(PY) -m nmt study {} --table > /dev/null'; \
	  if diff -r -q -x '*.png' "$$before/report" report; then echo "every archive's tables, CSVs and scores remade byte for byte"; \
	  else echo "error: the tables above differ from the checkout's (remake them with make tables and commit them)" >&2; exit 1; fi

reproduce-multi30k: $(STAMP)
	$(PY) -m nmt study multi30k

# The Multi30k table again from report/multi30k/ alone (the archived runs; no training, no data).
multi30k-table: $(STAMP)
	$(PY) -m nmt study multi30k --table

# Every scheme x 3 seeds at the full budget (configs/multi30k/best.yaml, 1,984 updates): a GPU study
# (48 runs; 16 at a time took 21 minutes on one H100). The table and its ranking against the
# 800-update table again from report/multi30k-best-all/ alone:
reproduce-multi30k-best-all: $(STAMP)
	$(PY) -m nmt study multi30k-best-all --device cuda --parallel 16

multi30k-best-all-table: $(STAMP)
	$(PY) -m nmt study multi30k-best-all --table

reproduce-iwslt2017: $(STAMP)
	$(PY) -m nmt study iwslt2017 --device cuda

bench: $(STAMP)
	$(PY) -m nmt bench --out runs/bench

# Multi30k fr-en (task 1, raw) into $MULTI30K_DIR or datasets/multi30k-fr-en, each file's checksum checked
# (docs/data.md); offline it says which files to put where.
data: $(STAMP)
	$(PY) -m nmt data fetch multi30k

# report.md (and README's table head) from the archive under report/ and the readings in report/text/.
report: $(STAMP)
	$(PY) -m nmt report

# Transformer-base per scheme on the device (CUDA when present): trains, checks, prints speed.
gpu-check: $(STAMP)
	$(PY) -m nmt gpu check

# A lent GPU (docs/studies.md, "A wave on a lent GPU"): gpu-prep here fills .gpu/ (wheels, data) for the
# call's carry; gpu-wave there (no venv: the machine's own Python and torch) trains the queue's next runs
# (gpu/queue.yaml) within LIMIT seconds and packs each finished run into OUT/<study>.tar.xz;
# gpu-unpack here brings the packs into the archives and remakes their tables.
gpu-prep: $(STAMP)
	$(PY) -m nmt gpu prep

OUT ?= runs/gpu-wave
LIMIT ?= 570
gpu-wave:
	bash gpu/wave.sh $(OUT) $(LIMIT) $(WAVE_OPTIONS)

gpu-unpack: $(STAMP)
	@test -n "$(FILES)" || { echo "usage: make gpu-unpack FILES='OUT/<study>.tar.xz ...'" >&2; exit 2; }
	$(PY) -m nmt gpu unpack $(FILES)

clean:
	rm -rf runs/cache
