"""The site-check facet of a fabric backend: its devices' preflight for ``gpufabric site check``
(the findings themselves: :mod:`gpufabric.domain.site_check`)."""

from __future__ import annotations

from collections.abc import Sequence

from gpufabric.domain.site_check import SiteCheck, SiteContext


class BackendSiteChecks:
    """What a backend checks of its devices before anything runs."""

    def site_checks(self, context: SiteContext) -> Sequence[SiteCheck]:
        """Preflight of this fabric's devices for ``gpufabric site check`` (reachable, keys
        and certificates verified, pools free on the fabric, inventory ports seen), one
        finding each, never raising for a device at fault. Default: none."""
        return ()
