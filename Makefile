# Two commands do everything on a fresh machine with Python 3.11:
#   make run    install into .venv and run the main job on built-in data (diabetes)
#   make test   install into .venv (with test extras) and run the test suite
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
TORCH  ?= torch==2.13.0
OUT    ?= dubito-report
# test processes (pytest-xdist; each pinned to one thread by tests/conftest.py): 2 halves the suite's
# wall time on the project's 2-core machines (14.8 -> 8.5 min under the same load); 0 runs in one process
TEST_WORKERS ?= 2
export OMP_NUM_THREADS ?= 1
export MKL_NUM_THREADS ?= 1
export OPENBLAS_NUM_THREADS ?= 1

.PHONY: venv install install-test run test test-slow smoke-cells fashion-mnist clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

# torch first, pinned, where none is present: a bare `torch` requirement would pull a
# multi-GB CUDA build; 2.13.0 is a local CPU wheel on the project's machines.
venv: $(VENV)/bin/python
	@$(PY) -c "import torch" 2>/dev/null || $(PIP) install -q "$(TORCH)"

install: venv
	$(PIP) install -q -e .

install-test: venv
	$(PIP) install -q -e ".[test]"

run: install
	$(VENV)/bin/dubito run --data diabetes --method ensemble --out $(OUT)

test: install-test
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# Fashion-MNIST from Debian (dataset-fashion-mnist, /usr/share/datasets/fashion-mnist); needs apt
# rights (root or sudo). Optional: without it the data are downloaded into the user cache on first
# use, and the tests that need the files skip with the reason.
fashion-mnist:
	@if [ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then echo "dataset-fashion-mnist is installed"; \
	elif [ "$$(id -u)" = 0 ]; then apt-get install -y -q dataset-fashion-mnist || (apt-get update -q && apt-get install -y -q dataset-fashion-mnist); \
	elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo apt-get install -y -q dataset-fashion-mnist; \
	else echo "no apt rights: skipped dataset-fashion-mnist (tests needing it will skip)"; fi

# pytest exits 5 when no test is marked slow: that is not a failure
test-slow: install-test
	$(PY) -m pytest -q -m slow || [ $$? -eq 5 ]

# the golden numbers of tests/experiments/test_smoke_presets.py, from this checkout on this machine
smoke-cells: install-test
	$(PY) tests/experiments/export_smoke_cells.py

clean:
	rm -rf $(VENV) $(OUT) .pytest_cache build *.egg-info src/*.egg-info
