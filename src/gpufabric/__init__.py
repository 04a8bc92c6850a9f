"""gpufabric: hand GPU servers from one tenant to the next, isolated on every fabric."""

__version__ = "0.1.0"
