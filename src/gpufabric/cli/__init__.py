"""gpufabric."""
