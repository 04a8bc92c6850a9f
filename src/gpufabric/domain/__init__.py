"""Domain: typed values, models and errors. Imports nothing else of gpufabric."""
