# gpufabric — `make demo` and `make test` do all setup on a fresh Debian machine.
VENV := .venv
BIN := $(VENV)/bin
# Where scripts/openstack-venv.sh puts Neutron's venv (the same variable overrides both).
NEUTRON_VENV ?= .venv-neutron
export GPUFABRIC_HOME ?= $(CURDIR)/.gpufabric

.PHONY: setup test test-durations lint lint-integrations unit demo bench clean lab-down test-integration neutron-venv esi-leap-venv ironic-venv esiclient-venv openstack-venvs test-neutron-driver chaos

setup:
	@bash scripts/setup.sh

lint: setup
	$(BIN)/ruff check src tests bench
	$(BIN)/lint-imports
	$(BIN)/mypy

# The whole suite, tests/integration (real Neutron, esi-leap, Ironic) included: the four OpenStack
# venvs are built first (in parallel, idempotent: seconds when already there). The suite runs as
# two pytest processes at once, each half of it by recorded durations (scripts/test.sh says why).
test: setup lint lint-integrations openstack-venvs test-neutron-driver
	@bash scripts/test.sh

# Every kill point / drill iteration of the trimmed slow tests (see their docstrings).
test-full: setup lint
	GPUFABRIC_TEST_FULL=1 $(BIN)/pytest -q

# The fault campaign (issue 35, docs/chaos.md) on the lab: CHAOS_SECONDS long (default 1800), seeded
# by CHAOS_SEED (default: the clock, printed; the same seed replays the same fault schedule).
CHAOS_SECONDS ?= 1800
chaos: setup
	GPUFABRIC_CHAOS=1 GPUFABRIC_CHAOS_SECONDS=$(CHAOS_SECONDS) GPUFABRIC_CHAOS_SEED=$(CHAOS_SEED) \
		$(BIN)/pytest -q -s -p no:cacheprovider tests/e2e/test_chaos_short.py

# Re-records tests/durations.json (how scripts/test.sh halves the suite): one process, so the
# durations are those of a test alone; run it when tests were added or got slower.
test-durations: setup
	$(BIN)/pytest -q --store-durations --durations-path tests/durations.json
	$(BIN)/python scripts/durations.py

unit: setup
	$(BIN)/pytest -q tests/unit tests/fabrics/*/unit

# Real OpenStack services, each in its own venv (scripts/openstack-venv.sh names their pins; see
# docs/openstack.md); part of `make test`.
neutron-venv:
	@bash scripts/openstack-venv.sh neutron

esi-leap-venv:
	@bash scripts/openstack-venv.sh esi-leap

ironic-venv:
	@bash scripts/openstack-venv.sh ironic

esiclient-venv:
	@bash scripts/openstack-venv.sh esiclient

openstack-venvs:
	@bash scripts/openstack-venv.sh

lint-integrations: setup
	$(BIN)/ruff check integrations tests/integration
	cd integrations/neutron && ../../$(BIN)/mypy --strict --ignore-missing-imports gpufabric_neutron

# The ML2 driver's and the esi-leap sync's own unit tests, in Neutron's venv (neutron-lib, oslo).
test-neutron-driver: neutron-venv
	cd integrations/neutron && $(abspath $(NEUTRON_VENV))/bin/pytest -q -p no:cacheprovider tests

# Only the OpenStack parts (what `make test` runs of them).
test-integration: setup lint-integrations openstack-venvs test-neutron-driver
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
