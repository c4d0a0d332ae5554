"""Sizes as people read them: a leaf every layer may import (it imports nothing of nxgates)."""

from __future__ import annotations


def fmt_bytes(n: int) -> str:
    """``n`` bytes in B, KiB, MiB, GiB or TiB, one decimal (whole bytes below a KiB)."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{int(value)} B"
        value /= 1024
    return f"{value:.1f} TiB"
