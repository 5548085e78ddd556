"""The installed distribution: one import name, ``acidstream``, holding every layer.

Builds the wheel from this checkout as pip does for a user (``pip wheel``, build isolation),
then checks what it would put into site-packages and that the layers import from it.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("acid", "txn", "ingest", "sources", "sinks", "compaction", "recovery")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0 and "No matching distribution found for setuptools" in proc.stderr:
        pytest.skip("pip cannot fetch setuptools for an isolated build here (no index reachable)")
    assert proc.returncode == 0, proc.stderr
    (built,) = out.glob("acidstream-*.whl")
    return built


def test_the_wheel_installs_one_top_level_name(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"acidstream"}
    top_level = next(n for n in names if n.endswith(".dist-info/top_level.txt"))
    assert zipfile.ZipFile(wheel).read(top_level).decode().split() == ["acidstream"]
    # Every module of the checkout is in it (a package folder without __init__ would be left out).
    in_tree = {
        str(p.relative_to(ROOT))
        for p in (ROOT / "acidstream").rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert in_tree and in_tree <= set(names), sorted(in_tree - set(names))[:5]
    for layer in LAYERS:
        assert f"acidstream/{layer}/__init__.py" in names, layer


def test_the_layers_import_from_the_installed_wheel(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        timeout=300,
    )
    assert sorted(
        p.name for p in target.iterdir() if not p.name.endswith(".dist-info") and p.name != "bin"
    ) == ["acidstream"]
    mods = ", ".join(f"acidstream.{layer}" for layer in LAYERS)
    code = (
        f"import sys; sys.path.insert(0, {str(target)!r}); "
        f"import acidstream, {mods}, acidstream.cli.main, acidstream.jobs.kafka_job; "
        "print(acidstream.__file__); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        f"{LAYERS!r}))"
    )
    # -I: no PYTHONPATH, no cwd on the path: only the wheel's copy can be found first.
    out = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    first, loaded = out.stdout.splitlines()
    assert first.startswith(str(target)), first
    assert loaded == "[]"  # nothing is imported under an old top-level name
