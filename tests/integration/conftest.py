"""Integration tests (marker ``integration``): a real Neutron, a real esi-leap and a real Ironic
(with python-esiclient as the user's client), each in its own venv (scripts/openstack-venv.sh,
built by ``make test`` before the suite and idempotent; a test run without them builds them on
first use). They run with the rest of the suite in ``make test``; ``make test-integration`` (or
``-m integration``) runs only them, ``-m "not integration"`` leaves them out."""
