"""A cost table corrected by a device profile (the simulated backend's ``--device-profile``).

The profile's factors multiply the simulator's own terms: GPU / DLA rows of the per-layer
times (device, op-class, per-layer and seeded noise factors), boundary and model I/O reformat
costs, the per-loadable overhead and the contention sensitivities; its ``engine_us`` is added
to the per-engine cost. The profile object is duck-typed (``layer_factors``, ``digest``...): see
:class:`placetune.calibration.profile.DeviceProfile`.
"""

from __future__ import annotations

import copy
import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

from placetune.errors import ConfigError

if TYPE_CHECKING:
    from placetune.backends.simulate.costs import CostTable

__all__ = ["apply_profile"]

_US = 1e-3
_CACHE: "weakref.WeakKeyDictionary[Any, dict[str, Any]]" = weakref.WeakKeyDictionary()


def apply_profile(table: "CostTable", profile: Any) -> "CostTable":
    """``table`` with ``profile``'s corrections applied (cached per table and profile digest);
    ``table`` itself when ``profile`` is None."""
    if profile is None:
        return table
    per = _CACHE.setdefault(table, {})
    key = profile.digest()
    out = per.get(key)
    if out is None:
        out = copy.copy(table)
        f = profile.layer_factors(table)
        out.t_alone = table.t_alone * f
        out.t_fused = table.t_fused * f
        out.edge_ms = table.edge_ms * profile.boundary
        out.in_ms = table.in_ms * profile.boundary
        out.out_ms = table.out_ms * profile.boundary
        out.island_ms = table.island_ms * profile.loadable
        out.contention = table.contention * profile.contention
        out.engine_ms = max(0.0, table.engine_ms + profile.engine_us * _US)
        arrays = (out.t_alone, out.t_fused, out.edge_ms, out.in_ms, out.out_ms, out.island_ms, out.contention)
        if not all(np.isfinite(a).all() for a in arrays) or not np.isfinite(out.engine_ms):
            # a schedule of NaN or infinite times never ends: refuse the profile, never measure with it
            raise ConfigError("the device profile makes some simulated times infinite or NaN: its factors "
                              "multiply to more than a float holds; use factors nearer 1")
        if len(per) > 16:
            per.clear()
        per[key] = out
    return out
