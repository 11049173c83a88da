"""Benchmarks, run on demand (never in the unit suite); each module's docstring says how."""

from __future__ import annotations

import os


def load_average() -> str:
    """The 1-, 5- and 15-minute load averages as ``"0.12 0.34 0.56"``: printed beside the
    figures, since the host may be shared and load moves them."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())
