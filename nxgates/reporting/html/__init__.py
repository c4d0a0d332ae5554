"""``--html PATH``: one self-contained page a person reads offline, with plots drawn by matplotlib.

matplotlib is the optional extra ``nxgates[html]``; this module only checks it is there, so a run that
writes no page never imports it.
"""

from __future__ import annotations

from typing import Any

from nxgates.errors import ConfigError

INSTALL_LINE = "--html needs matplotlib: pip install 'nxgates[html]'"


def require_plotting() -> None:
    """Exit 2 with the install line, before any gate runs, when matplotlib is not installed."""
    from importlib.util import find_spec

    if find_spec("matplotlib") is None:
        raise ConfigError(INSTALL_LINE)


def html_text(doc: dict[str, Any]) -> str:
    """The page for the JSON report's document (:func:`nxgates.reporting.json_report.to_json`)."""
    from nxgates.reporting.html.page import render

    return render(doc)
