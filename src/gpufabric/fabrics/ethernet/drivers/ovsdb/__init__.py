"""The OVSDB driver: one Open vSwitch bridge over OVSDB (driver.py), the connections its bridges
share (pool.py) and python-ovs's TLS identity (tls.py)."""
