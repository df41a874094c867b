"""GPU proof kit: roll's GPU paths measured on whatever GPU is lent, in a few minutes.

    make gpu-kit                                   # once, here: wheels + tokenizer in .gpu-kit/
    python3 bench/gpu_proof.py --json $OUT/proof.json          # there (see docs/gpu.md)
    .venv/bin/python bench/gpu_proof.py --device cpu --models tiny-random   # the CPU check

Without Ray, in a process per model and DeepSpeed or FSDP2 case on a GPU (one per model on a
CPU; bench/gpu_proof_cases.py), with roll's own workers and strategies on random-initialised
models of the registry's shapes (qwen2.5-0.5b ... 7b):

- train-hf, train-zero2, train-zero3, train-fsdp2, train-fsdp2-offload: one timed policy
  update (forward, backward, AdamW) with the hf strategy, DeepSpeed and FSDP2 (one rank, NCCL
  on a GPU; FSDP2's CPU offload on GPUs only), in the plan's precision
  (bf16-mixed on GPUs); `roll plan`'s actor_train memory beside torch's measured peak;
- generate-bN: the hf engine sampling N prompts in one decode batch with its decode on the
  device (on CUDA a static KV cache and CUDA graphs; the kit's CPU run forces the static
  decode without graphs), its greedy samples checked against the dynamic decode's;
  generate-bN-dynamic: the dynamic decode (the batch shrinking as samples stop), the one
  before #68: new tokens/s and MFU; the plan's actor_infer memory beside the peak;
- grpo-step: actor_train, actor_infer and the reference colocated on one GPU: generate, old and
  reference log-probs, the update and the weight sync, time and MFU per phase;
- train-cli (only when asked: `--cases train-cli`; bench/gpu_proof_train_cli.py): `roll train`
  itself under Ray on `--gpus 1`: 3 steps, a checkpoint, the driver killed, `roll resume`
  to step 4; per-phase times, each role's peak memory beside the plan, events.log.
- sync (GPU only; the CPU suite runs it in tests/distributed/test_ipc_sync.py): the weight
  sync to an engine in another process on the same GPU, through host memory (gloo) and by
  CUDA IPC handles, each checked bit for bit (bench/sync_case.py).

MFU divides by the bf16 (fp32 on a CPU) matmul peak measured in the same process. The
output: a markdown table per part on stdout, every row in `--json` (a list) and, as each
case ends, in `--json`'s `.jsonl` sibling (so a kit stopped at its time limit keeps what
it measured). A model whose cases fail or run out of memory is a row with its error; the
kit goes on with the next model.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KIT = REPO / ".gpu-kit"
GPU_MODELS = "qwen2.5-0.5b,qwen2.5-1.5b,qwen2.5-3b,qwen2.5-7b"
DEFAULT_CASES = "hf,zero2,zero3,fsdp2,fsdp2-offload,generate,grpo,sync"
STARTED = time.time()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=("cuda", "cpu"), default=None, help="default: cuda if seen")
    p.add_argument("--models", default=None, help=f"comma-separated (cuda: {GPU_MODELS})")
    p.add_argument(
        "--cases", default=None, help=f"cuda: {DEFAULT_CASES}; cpu: without fsdp2-offload, sync"
    )
    p.add_argument("--big-cases", default="generate", help="cases of models over 5B parameters")
    p.add_argument("--prompt-tokens", type=int, default=None, help="cuda 256, cpu 16")
    p.add_argument("--new-tokens", type=int, default=None, help="cuda 256, cpu 8")
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--train-rows", type=int, default=None, help="cuda 16, cpu 4")
    p.add_argument("--gen-batches", default=None, help="cuda 64,256; cpu 4")
    p.add_argument("--grpo-prompts", type=int, default=None, help="cuda 8, cpu 2")
    p.add_argument("--group-size", type=int, default=None, help="cuda 8, cpu 2")
    p.add_argument("--model-timeout", type=float, default=900, help="seconds per process")
    p.add_argument("--json", type=Path, default=Path("gpu_proof.json"))
    p.add_argument(
        "--memory-history",
        type=Path,
        default=None,
        help="folder: record the timed updates' CUDA allocations and summarise their peak",
    )
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)  # child: one model
    return p.parse_args(argv)


def shapes_of(args: argparse.Namespace):  # noqa: ANN201
    from gpu_proof_cases import Shapes

    gpu = args.device == "cuda"

    def pick(value, on_gpu, on_cpu):  # noqa: ANN001, ANN202
        return value if value is not None else (on_gpu if gpu else on_cpu)

    batches = pick(args.gen_batches, "64,256", "4")
    return Shapes(
        prompt_tokens=pick(args.prompt_tokens, 256, 16),
        new_tokens=pick(args.new_tokens, 256, 8),
        micro_batch=args.micro_batch,
        train_rows=pick(args.train_rows, 16, 4),
        gen_batches=tuple(int(b) for b in batches.split(",")),
        grpo_prompts=pick(args.grpo_prompts, 8, 2),
        group_size=pick(args.group_size, 8, 2),
    )


def tokenizer_source() -> Path:
    """The kit's carried tokenizer (`make gpu-kit`), else the embedded model's."""
    carried = KIT / "tokenizer"
    if (carried / "tokenizer.json").is_file():
        return carried
    from rollcli.models.loading import resolve_model

    return resolve_model("smollm2-135m")


def child(args: argparse.Namespace) -> None:
    """One model's cases in this process (the parent started it)."""
    from gpu_proof_cases import Device, run_model

    from rollcli.models.loading import cache_dir
    from rollcli.models.registry import get_model_spec
    from rollcli.models.shapes import write_shape_folder

    spec = get_model_spec(args.one)
    folder = write_shape_folder(spec, cache_dir() / "shapes" / spec.name, tokenizer_source())
    cases = tuple(c for c in args.cases.split(",") if c)
    device, shapes, out = Device(args.device), shapes_of(args), jsonl_of(args.json)
    deadline = STARTED + args.model_timeout - 15  # its roll processes gone before the parent's stop
    run_model(args.one, folder, device, shapes, cases, out, args.memory_history, deadline)


def jsonl_of(path: Path) -> Path:
    return path.with_suffix(".jsonl")


def environment(device: str) -> dict:
    import torch
    import transformers

    env = {
        "date": datetime.date.today().isoformat(),
        "commit": _commit(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": device,
    }
    if device == "cuda":
        env["gpu"] = torch.cuda.get_device_name(0)
        env["gpu_mem_gib"] = round(torch.cuda.get_device_properties(0).total_memory / 1024**3, 1)
    try:
        import deepspeed

        env["deepspeed"] = deepspeed.__version__
    except ImportError as err:
        env["deepspeed"] = f"missing ({err})"
    return env


def _commit() -> str:
    """This checkout's commit; `ROLL_COMMIT` where the tree travelled without its .git."""
    if os.environ.get("ROLL_COMMIT"):
        return os.environ["ROLL_COMMIT"]
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
        )
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def run_all(args: argparse.Namespace) -> list[dict]:
    from rollcli.models.registry import get_model_spec
    from rollcli.models.spec import param_count

    out = jsonl_of(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("", encoding="utf-8")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO / "bench"), env.get("PYTHONPATH", "")) if p
    )
    for model in args.models.split(","):
        big = param_count(get_model_spec(model)) > 5e9
        for cases in process_groups(args.big_cases if big else args.cases, args.device):
            # the parent's flags first: the child's own --one and --cases come last and win
            cmd = [sys.executable, __file__, *sys.argv[1:], "--one", model, "--cases", cases]
            cmd += ["--device", args.device, "--json", str(args.json)]
            print(f"== {model}: {cases}", flush=True)
            try:
                done = subprocess.run(cmd, env=env, timeout=args.model_timeout)
                if done.returncode:
                    error = f"exit {done.returncode}"
                    _append(out, {"model": model, "case": cases, "error": error})
            except subprocess.TimeoutExpired:
                _append(out, {"model": model, "case": cases, "error": "timeout"})
    return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]


def process_groups(cases: str, device: str = "cuda") -> list[str]:
    """The processes a model's cases run in. On a GPU: each DeepSpeed stage alone (its engine
    keeps GPU memory after it is deleted: 20 GiB of qwen2.5-1.5b's ZeRO-3 state stayed, and
    the next case ran out of memory), each FSDP2 case alone (it opens the process's default
    group), everything else together. On a CPU, where no case measures device memory, all in
    one process (each process spends ~12 s importing torch, transformers and DeepSpeed).

    >>> process_groups("hf,zero2,zero3,fsdp2,generate,grpo")
    ['hf,generate,grpo', 'zero2', 'zero3', 'fsdp2']
    >>> process_groups("hf,zero2,zero3,fsdp2,generate,grpo", "cpu")
    ['hf,zero2,zero3,fsdp2,generate,grpo']
    >>> process_groups("hf,generate,train-cli")
    ['train-cli', 'hf,generate']
    """
    names = [c for c in cases.split(",") if c]
    if device == "cpu":
        return [",".join(names)] if names else []
    first = [c for c in names if c == "train-cli"]
    alone = [c for c in names if c.startswith(("zero", "fsdp2"))]
    rest = ",".join(c for c in names if c not in alone and c not in first)
    return first + ([rest] if rest else []) + alone


def _append(path: Path, row: dict) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")


def _g(value: float | None, fmt: str = ".1f") -> str:
    return "-" if value is None else format(value, fmt)


def tables(rows: list[dict], env: dict) -> str:
    """The markdown tables of docs/gpu.md."""
    lines = [
        f"{env['date']}, {env.get('gpu', env['device'])}, commit {env['commit']}, torch "
        f"{env['torch']}, transformers {env['transformers']}, deepspeed {env['deepspeed']}",
        "",
    ]
    peaks = {r["model"]: r["flops"] for r in rows if r.get("case") == "peak"}
    if peaks:
        best = max(peaks.values())
        lines += [f"matmul peak measured in the same processes: {best / 1e12:.3g} TFLOP/s", ""]
    train = [r for r in rows if str(r.get("case", "")).startswith("train-") and "part" not in r]
    if train:
        lines += [
            "| model | strategy | step s | tokens/s | MFU | plan GiB | measured GiB | plan/measured |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        lines += [_train_line(r) for r in train]
        lines.append("")
    gen = [r for r in rows if str(r.get("case", "")).startswith("generate")]
    if gen:
        lines += [
            "| model | batch | new tokens | mean reply | tokens/s | MFU | plan GiB | measured GiB | plan/measured |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        lines += [_gen_line(r) for r in gen]
        lines.append("")
    grpo = [r for r in rows if r.get("case") == "grpo-step"]
    if grpo:
        phases = ("generate", "old_logprobs", "ref_logprobs", "train", "weight_sync")
        lines += [
            "| model | samples | "
            + " | ".join(f"{p} s (MFU)" for p in phases)
            + " | step s | plan GiB | measured GiB |",
            "| --- | --- | " + " | ".join("---" for _ in phases) + " | --- | --- | --- |",
        ]
        for r in grpo:
            cells = [
                f"{r['phases_s'][p]:.2f}" + (f" ({r['mfu'][p]:.1%})" if p in r["mfu"] else "")
                for p in phases
            ]
            lines.append(
                f"| {r['model']} | {r['samples']} | "
                + " | ".join(cells)
                + f" | {r['step_s']:.2f} | {_g(r.get('planned_gib'))} | {_g(r.get('measured_gib'))} |"
            )
        lines.append("")
    cli = [r for r in rows if r.get("case") == "train-cli"]
    if cli:
        from gpu_proof_train_cli import table_lines

        lines += [*table_lines(cli), ""]
    for r in rows:
        if r.get("case") == "sync" and "error" not in r:
            paths = ", ".join(f"{p} {t:.3f} s" for p, t in r["paths_s"].items())
            lines.append(
                f"- {r['model']} weight sync of {r['weight_gib']:.2f} GiB: {paths}; chosen "
                f"{r['chosen']}; bit exact {r['bit_exact']}, verified {r['verified']}"
            )
    errors = [r for r in rows if "error" in r]
    for r in errors:
        lines.append(f"- {r['model']} {r['case']}: {r['error']}")
    return "\n".join(lines)


def _train_line(r: dict) -> str:
    if "error" in r:
        return f"| {r['model']} | {r['case'][6:]} | failed | | | | | |"
    return (
        f"| {r['model']} | {r['case'][6:]} | {r['step_s']:.2f} | {r['tokens_per_s']:.0f} | "
        f"{r['mfu']:.1%} | {_g(r.get('planned_gib'))} | {_g(r.get('measured_gib'))} | "
        f"{_g(r.get('plan_over_measured'), '.2f')} |"
    )


def _gen_line(r: dict) -> str:
    if "error" in r:
        return f"| {r['model']} | {r['case'][10:]} | failed | | | | | | |"
    return (
        f"| {r['model']} | {r['case'][10:]} | {r['new_tokens']} | {r['mean_response']:.0f} | "
        f"{r['tokens_per_s']:.0f} | {r['mfu']:.1%} | {_g(r.get('planned_gib'))} | "
        f"{_g(r.get('measured_gib'))} | {_g(r.get('plan_over_measured'), '.2f')} |"
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.device is None:
        import torch

        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.models is None:
        args.models = GPU_MODELS if args.device == "cuda" else "tiny-random"
    if args.cases is None:
        gpu_only = () if args.device == "cuda" else ("fsdp2-offload", "sync")
        args.cases = ",".join(c for c in DEFAULT_CASES.split(",") if c not in gpu_only)
    sys.path.insert(0, str(REPO / "bench"))
    from tree_imports import use_tree

    use_tree()  # roll from this checkout where it is not installed (the GPU machine)
    if args.one:
        child(args)
        return 0
    rows = run_all(args)
    env = environment(args.device)
    args.json.write_text(json.dumps({"environment": env, "rows": rows}, indent=2) + "\n")
    print(tables(rows, env))
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
