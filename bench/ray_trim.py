"""A Ray small enough to travel to a lent GPU machine (docs/gpu.md): what `roll train` needs of it.

Ray 2.60's cp312 wheel unpacks to 193 MiB: its Java jar, the dashboard's web front end, the
library packages (Tune, Train, Serve, Data, RLlib, AIR, LLM) and the debug symbols of its
three native binaries take most of it. roll uses Ray core only (actors, placement groups,
scheduling strategies, `ray.exceptions`), with the dashboard off (`ray_session.start`:
`include_dashboard=False`). `trim(ray_dir)` removes the rest from an unpacked `ray/`
folder and strips the binaries; the same function trims the GPU machine's cp312 build
(`bench/gpu_kit.py`, packed as `.gpu-kit/ray.tar.xz`) and, in the slow test, a copy of this
venv's own Ray that then runs `roll train` (tests/bench/test_ray_trim.py), so nothing roll
needs is trimmed away unnoticed.

    python bench/ray_trim.py OUT    # a trimmed copy of this venv's Ray into OUT/ (the check's)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

MIB = 2**20

# what is removed from `ray/`, and why roll can do without it
REMOVED = {
    "jars": "the Java workers' jar: roll's workers are Python",
    "dashboard/client": "the dashboard's web front end: roll starts Ray without a dashboard",
    "tune": "Ray Tune: roll does not tune hyperparameters through Ray",
    "train": "Ray Train: roll places and drives its own trainers",
    "serve": "Ray Serve: roll's endpoint for agents is its own",
    "data": "Ray Data: roll reads data through `datasets` on the driver",
    "rllib": "RLlib: roll's RL is its own",
    "air": "Ray AIR: the libraries' shared layer (Tune, Train)",
    "llm": "Ray's LLM library (vLLM serving): roll drives its engines itself",
    "tests": "Ray's own tests",
}
# native code whose symbols no loader needs `strip --strip-unneeded` removes: the debug and
# static symbol tables (the dynamic symbols that `_raylet.so` is imported by stay)
STRIPPED = ("_raylet.so", "core/src/ray/gcs/gcs_server", "core/src/ray/raylet/raylet")


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def trim(ray_dir: Path) -> list[str]:
    """Trim the unpacked Ray package `ray_dir` (a `ray/` folder) in place; one line per thing
    removed or stripped, with the MiB it saved and why. A part that is already absent is
    skipped (a Ray without it); a binary missing from STRIPPED is an error: a Ray of another
    layout, whose trim would go unchecked."""
    if not (ray_dir / "__init__.py").is_file() or ray_dir.name != "ray":
        raise FileNotFoundError(f"{ray_dir}: not an unpacked `ray` package folder")
    lines = []
    for part, why in REMOVED.items():
        path = ray_dir / part
        if path.is_dir():
            size = folder_bytes(path)
            shutil.rmtree(path)
            lines.append(f"removed ray/{part} ({size / MIB:.1f} MiB): {why}")
    strip = shutil.which("strip")
    if strip is None:
        raise FileNotFoundError("`strip` (binutils) is not installed: apt-get install binutils")
    for binary in STRIPPED:
        path = ray_dir / binary
        if not path.is_file():
            raise FileNotFoundError(f"{path}: Ray's layout changed; update ray_trim.STRIPPED")
        before = path.stat().st_size
        subprocess.run([strip, "--strip-unneeded", str(path)], check=True)
        lines.append(
            f"stripped ray/{binary} ({before / MIB:.1f} -> {path.stat().st_size / MIB:.1f} MiB):"
            " symbols no loader needs"
        )
    return lines


def trimmed_copy(source: Path, out: Path) -> list[str]:
    """`source` (an installed `ray/` package, with its `ray-*.dist-info` beside it) copied
    into `out/` and trimmed there: a folder to put first on PYTHONPATH."""
    out.mkdir(parents=True, exist_ok=True)
    skip = shutil.ignore_patterns("__pycache__")  # this Python's bytecode: rebuilt on import
    shutil.copytree(source, out / "ray", ignore=skip, symlinks=True)
    for info in source.parent.glob("ray-*.dist-info"):
        shutil.copytree(info, out / info.name)
    return trim(out / "ray")


def pack(site: Path, archive: Path) -> int:
    """`site`'s `ray/` and `ray-*.dist-info` as a tar.xz (unpacked there into a folder on
    PYTHONPATH); its size in bytes."""
    with tarfile.open(archive, "w:xz", preset=6) as tar:
        for entry in sorted(site.iterdir()):
            if entry.name == "ray" or (
                entry.name.startswith("ray-") and entry.suffix == ".dist-info"
            ):
                tar.add(entry, arcname=entry.name)
    return archive.stat().st_size


def trimmed_wheel(wheel: Path, archive: Path) -> list[str]:
    """Ray's wheel `wheel` unpacked, trimmed and packed into `archive` (a tar.xz of `ray/` and
    its dist-info, for `tar -xJf ARCHIVE -C SITE` where SITE is on PYTHONPATH)."""
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp)
        with zipfile.ZipFile(wheel) as whl:
            whl.extractall(site)
        for binary in STRIPPED:  # zip files keep no modes: the two programs must run there
            (site / "ray" / binary).chmod(0o755)
        lines = trim(site / "ray")
        trimmed = folder_bytes(site / "ray")
        size = pack(site, archive)
    lines.append(
        f"{wheel.name}: {trimmed / MIB:.1f} MiB trimmed, {size / MIB:.1f} MiB as {archive.name}"
    )
    return lines


def requirements(name: str, python: str = "3.12") -> set[str]:
    """The distributions `name` needs, transitively, extras left out, as this environment's
    metadata lists them for Python `python` (normalised names, `name` not among them)."""
    from importlib.metadata import PackageNotFoundError, requires

    from packaging.requirements import Requirement

    env = {"python_version": python, "python_full_version": f"{python}.0", "extra": ""}
    seen: set[str] = set()
    todo = [name]
    while todo:
        try:
            listed = requires(todo.pop()) or []
        except PackageNotFoundError:
            continue  # needed but not installed here: the kit's import check names it
        for line in listed:
            req = Requirement(line)
            dist = req.name.lower().replace("_", "-")
            if (req.marker is None or req.marker.evaluate(env)) and dist not in seen:
                seen.add(dist)
                todo.append(dist)
    seen.discard(name)
    return seen


def main(argv: list[str]) -> int:
    import ray

    out = Path(argv[0])
    for line in trimmed_copy(Path(ray.__file__).parent, out):
        print(line)
    print(f"trimmed Ray {ray.__version__}: {folder_bytes(out / 'ray') / MIB:.1f} MiB in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
