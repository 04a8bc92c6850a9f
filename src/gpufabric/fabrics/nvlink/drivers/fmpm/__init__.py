"""The ``fmpm`` driver: each node's Fabric Manager through NVIDIA's Fabric-Manager-Client command
line (``driver.py``)."""
