"""The InfiniBand fabric kind (PKeys on a subnet), in the kinds' skeleton: ``kind`` (the seam) ->
``views`` / ``site_check`` / ``inventory/`` -> ``backend`` -> ``drivers/`` (``base``, ``opensm/``,
``ufm/``) -> ``readers/`` / ``audit/`` -> ``plan`` -> ``state/`` / ``entries`` / ``segments/``."""
