# gpufabric — `make demo` and `make test` do all setup on a fresh Debian machine.
VENV := .venv
BIN := $(VENV)/bin
export GPUFABRIC_HOME ?= $(CURDIR)/.gpufabric

.PHONY: setup test lint unit demo bench clean lab-down

setup:
	@bash scripts/setup.sh

lint: setup
	$(BIN)/ruff check src tests bench
	$(BIN)/lint-imports
	$(BIN)/mypy

test: setup lint
	$(BIN)/pytest -q

unit: setup
	$(BIN)/pytest -q tests/unit

demo: setup
	@bash scripts/demo.sh

bench: setup
	$(BIN)/python -m bench.run

lab-down:
	-$(BIN)/gpufabric lab down
	-GPUFABRIC_HOME=$(CURDIR)/.gpufabric/demo $(BIN)/gpufabric lab down

clean: lab-down
	rm -rf .gpufabric .pytest_cache .mypy_cache .ruff_cache
