"""Figures as PNG files (matplotlib, no display): what the MLflow UI shows beside a run and
what `dvc plots show` draws offline."""

from __future__ import annotations

import numpy as np


def confusion(matrix: np.ndarray, path, title: str, class_names: list[str]) -> None:
    """A confusion matrix as a PNG, its rows and columns named by `class_names`, counts in each
    cell when the matrix is small enough to read."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(matrix)
    size = max(5.0, min(14.0, n * 0.3))
    fig, ax = plt.subplots(figsize=(size, size))
    ax.imshow(np.log1p(matrix), cmap="Blues")
    ax.set_xlabel("predicted")
    ax.set_ylabel("actual")
    ax.set_title(title)
    ticks = np.arange(n)
    ax.set_xticks(ticks, class_names, rotation=90)
    ax.set_yticks(ticks, class_names)
    ax.tick_params(labelsize=7 if n > 20 else 9)
    if n <= 20:
        threshold = np.log1p(matrix).max() / 2
        for i in range(n):
            for j in range(n):
                if matrix[i, j]:
                    ax.text(
                        j,
                        i,
                        str(matrix[i, j]),
                        ha="center",
                        va="center",
                        fontsize=7,
                        color="white" if np.log1p(matrix[i, j]) > threshold else "black",
                    )
    fig.tight_layout()
    fig.savefig(path, dpi=100, format="png")
    plt.close(fig)


def learning_curves(history: list[dict], path, title: str) -> None:
    """Loss and accuracy per epoch, training and validation, side by side, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epochs = [row["epoch"] for row in history]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, metric in zip(axes, ("loss", "accuracy")):
        ax.plot(epochs, [row[metric] for row in history], marker="o", label="train")
        ax.plot(epochs, [row[f"val_{metric}"] for row in history], marker="o", label="validation")
        ax.set_xlabel("epoch")
        ax.set_ylabel(metric)
        ax.set_xticks(epochs)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100, format="png")
    plt.close(fig)
