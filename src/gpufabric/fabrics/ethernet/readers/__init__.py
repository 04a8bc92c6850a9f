"""Pure readers of what switches print (running configs, ``| json`` answers, OVS columns, the OVSDB
log): text in, port configurations out, no I/O; used by both drivers and by the tests alone."""
