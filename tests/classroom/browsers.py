"""Helpers shared by the classroom tests."""

from __future__ import annotations

import shutil


def browser() -> str | None:
    """A headless-capable Chromium on this machine (.ci/run installs Debian's), or None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None
