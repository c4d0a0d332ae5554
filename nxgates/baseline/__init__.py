"""Baselines: the figures a gate pins (its fingerprints), kept in a file and compared on later runs.

:mod:`~nxgates.baseline.cells` (an array as digests), :mod:`~nxgates.baseline.keys` (which entry a run
matches, and how it is named in lines), :mod:`~nxgates.baseline.compare` (the lines that say what moved),
:mod:`~nxgates.baseline.store` (the file, written safely), :mod:`~nxgates.baseline.session` (what
``nxgates run --baseline/--update-baseline`` does) and :mod:`~nxgates.baseline.reports` (``nxgates diff``).
"""
