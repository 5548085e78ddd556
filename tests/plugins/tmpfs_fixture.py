"""The ``tmpfs`` fixture: a real, small file system to fill up or make read-only.

The honest way to test a full disk or a read-only mount is a real one: mounting needs
root (which CI has); elsewhere the test is skipped with the reason printed.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

Tmpfs = Callable[..., Path]


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Tmpfs]:
    """``tmpfs(size="1m")`` mounts a tmpfs under ``tmp_path`` and returns its path;
    ``tmpfs.read_only(path)`` (``remount,ro``) is done by ``make_read_only``."""
    mounted: list[Path] = []

    def mount(size: str = "1m") -> Path:
        mnt = tmp_path / f"tmpfs{len(mounted)}"
        mnt.mkdir()
        proc = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)],
            capture_output=True, text=True,
        )  # fmt: skip
        if proc.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here (needs root): {proc.stderr.strip()}")
        mounted.append(mnt)
        return mnt

    yield mount
    for mnt in reversed(mounted):
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def make_read_only(mnt: Path) -> None:
    """Remount a tmpfs from :func:`tmpfs` read-only."""
    subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
