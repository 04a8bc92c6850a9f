"""The NVLink drivers: ``base.py`` the contract every driver implements, one folder per driver
(``fmpm/``: NVIDIA's Fabric-Manager-Client command line)."""
