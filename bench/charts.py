"""What every chart of docs/benchmarks.md shares: grid, legend, layout, a PNG at 110 dpi."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def save_chart(fig: Any, ax: Any, path: Path) -> str:
    """Finish the chart, write it to `path` and close it; returns its file name."""
    import matplotlib.pyplot as plt

    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name
