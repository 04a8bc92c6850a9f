# gpufabric — `make demo` and `make test` do all setup on a fresh Debian machine.
VENV := .venv
BIN := $(VENV)/bin
export GPUFABRIC_HOME ?= $(CURDIR)/.gpufabric

.PHONY: setup test lint unit demo bench clean lab-down test-integration neutron-venv esi-leap-venv

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

# Real OpenStack services, each in its own venv (not in `make test`: see README / docs/openstack.md).
neutron-venv:
	@bash scripts/neutron-venv.sh

esi-leap-venv:
	@bash scripts/esi-leap-venv.sh

test-integration: setup neutron-venv esi-leap-venv
	$(BIN)/ruff check integrations tests/integration
	cd integrations/neutron && ../../$(BIN)/mypy --strict --ignore-missing-imports gpufabric_neutron
	cd integrations/neutron && ../../.venv-neutron/bin/pytest -q tests
	$(BIN)/pytest -q -m integration tests/integration

demo: setup
	@bash scripts/demo.sh

bench: setup
	$(BIN)/python -m bench.run

lab-down:
	-$(BIN)/gpufabric lab down
	-GPUFABRIC_HOME=$(CURDIR)/.gpufabric/demo $(BIN)/gpufabric lab down

clean: lab-down
	rm -rf .gpufabric .pytest_cache .mypy_cache .ruff_cache
