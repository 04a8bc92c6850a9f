"""Tests of one fabric kind each, by category (unit, contract, functional), as ``src/gpufabric/fabrics/<kind>/``."""
