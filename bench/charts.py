"""What every chart of docs/benchmarks.md shares: grid, legend, layout; a PNG at 110 dpi or an SVG.

SVGs keep their text as text and carry no date, and their element ids come from a fixed salt, so
a rerun with the same figures writes the same file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def save_chart(fig: Any, ax: Any, path: Path) -> str:
    """Finish the chart, write it to `path` (format from its suffix) and close it; returns its file name."""
    import matplotlib
    import matplotlib.pyplot as plt

    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    if path.suffix == ".svg":
        with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "rollout-bench"}):
            fig.savefig(path, metadata={"Date": None})
    else:
        fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name
