"""gpufabric for OpenStack/ESI: an ML2 mechanism driver and an esi-leap lease mirror.

Runs inside Neutron's (or esi-leap's) own venv and talks to gpufabric only over its REST
API (``/api/v1``, bearer token); it never imports gpufabric.
"""
