"""Fabric drivers, one package per fabric; they import only gpufabric.domain."""
