"""Rollout throughput: transformers `generate` vs roll's hf engine vs roll's vllm engine.

    .venv/bin/python bench/rollout.py                               # batch 16 and 64, 128 tokens
    .venv/bin/python bench/rollout.py --batch-sizes 8 --new-tokens 16   # a quick check

Same model, same chat prompts (one sample each, temperature 1), every sample exactly
`--new-tokens` long (EOS does not stop it), so every engine does the same work. The vllm
rows run when vllm is installed (`make vllm`), once per `--vllm-dtypes`; the hf engine once
per `--hf-precisions` (`rollout.precision` on a CPU: fp32, int8 linears, bf16 linears; and
`bf16-model`, the model loaded whole in bf16, as a GPU's engine holds it). The compute-bound
limit is the float32 matrix-multiply FLOP/s measured in this run over 2 x parameters FLOPs
per generated token (`rollcli.tracking.peak.matmul_peak`, the peak `perf/*_mfu` divide by
in a run). Engine start-up (vLLM compiles) is not timed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable

import torch
from rich.console import Console
from rich.table import Table

from rollcli.config.engines import vllm_available
from rollcli.models.loading import resolve_model
from rollcli.strategies.hf_infer import HFInferEngine
from rollcli.strategies.hf_model import load_causal_lm, load_tokenizer
from rollcli.strategies.sampling import SamplingParams
from rollcli.strategies.threads import set_threads
from rollcli.tracking.peak import matmul_peak

QUESTION = "What is {a} + {b}? Show your steps, then the answer."


def chat_prompts(tokenizer, count: int, question: str = QUESTION, a: int = 3) -> list[list[int]]:
    """`count` chat prompts asking `question` of sums `17 i + a` and `29 i + 11`."""
    out = []
    for i in range(count):
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": question.format(a=17 * i + a, b=29 * i + 11)}],
            add_generation_prompt=True,
            tokenize=False,
        )
        out.append(tokenizer(text, add_special_tokens=False)["input_ids"])
    return out


def timed(run: Callable[[], int]) -> tuple[int, float]:
    start = time.perf_counter()
    tokens = run()
    return tokens, time.perf_counter() - start


def hf_generate_run(model, prompts: list[list[int]], new_tokens: int, pad_id: int) -> int:
    from rollcli.data.padding import pad_left

    ids, mask = pad_left(prompts, pad_id)
    with torch.no_grad():
        out = model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            do_sample=True,
            temperature=1.0,
            top_p=1.0,
            top_k=None,
            pad_token_id=pad_id,
        )
    return (out.shape[1] - ids.shape[1]) * out.shape[0]


def engine_run(engine, prompts: list[list[int]], new_tokens: int) -> int:
    gens = engine.generate(prompts, SamplingParams(max_new_tokens=new_tokens, temperature=1.0))
    return sum(len(g.token_ids) for g in gens)


HF_DTYPES = {
    "fp32": torch.float32,
    "bf16": torch.float32,  # bf16 copies of the linears over the fp32 model
    "int8": torch.float32,
    "bf16-model": torch.bfloat16,
}


def build_runs(args, path, model, pad: int) -> list[tuple[str, Callable[[list[list[int]]], int]]]:
    """(label, run) per engine; every engine is built before any timing starts."""
    runs: list[tuple[str, Callable[[list[list[int]]], int]]] = [
        ("generate", lambda p: hf_generate_run(model, p, args.new_tokens, pad))
    ]
    for precision in args.hf_precisions:  # each on a model of its own (int8 / bf16 patch linears)
        own = model if precision == "fp32" else load_causal_lm(path, dtype=HF_DTYPES[precision])
        low = {"int8": precision == "int8", "bf16": precision == "bf16"}
        hf = HFInferEngine(own, [], pad, **low)  # no EOS: runs to the end
        label = "roll hf" if precision == "fp32" else f"roll hf {precision}"
        runs.append((label, lambda p, e=hf: engine_run(e, p, args.new_tokens)))
    if args.vllm_dtypes and not vllm_available():
        print("vllm is not installed (make vllm): skipping the vllm engine", file=sys.stderr)
        return runs
    from rollcli.strategies.vllm_infer import VLLMInferEngine

    for dtype in args.vllm_dtypes:
        start = time.perf_counter()
        engine = VLLMInferEngine(
            path,
            [],
            dtype=dtype,
            max_num_seqs=max(args.batch_sizes),
            enforce_eager=args.vllm_eager,
        )
        print(f"vllm {dtype} ready in {time.perf_counter() - start:.0f} s", file=sys.stderr)
        runs.append((f"roll vllm {dtype}", lambda p, e=engine: engine_run(e, p, args.new_tokens)))
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--hf-precisions",
        nargs="+",
        choices=list(HF_DTYPES),
        default=["fp32", "int8"],
        help="roll hf engine rows: its rollout.precision on a CPU (bf16: bf16 copies of the "
        "linears; bf16-model loads the model whole in bf16)",
    )
    parser.add_argument("--vllm-dtypes", nargs="*", default=["bfloat16", "float32"])
    parser.add_argument("--vllm-eager", action="store_true", help="skip vLLM's torch.compile")
    parser.add_argument(
        "--rounds", type=int, default=1, help="rounds over all engines; the best round counts"
    )
    args = parser.parse_args()

    set_threads(args.threads)  # before any vLLM engine, which then pins torch's threads
    path = resolve_model(args.model)
    tokenizer = load_tokenizer(path)
    model = load_causal_lm(path)
    params = sum(p.numel() for p in model.parameters())  # tied weights counted once
    prompts = chat_prompts(tokenizer, max(args.batch_sizes))
    runs = build_runs(args, path, model, tokenizer.pad_token_id)
    for _, run in runs:
        run(prompts[:2])  # warm up
    # the limit is fp32's: bf16 and int8 rows can pass it where the CPU has AVX-512 BF16/VNNI
    flops = matmul_peak("cpu", torch.float32)
    best: dict[tuple[str, int], float] = {}
    # engines take turns within a round, so a slow spell of a shared machine hits all of them
    for _ in range(args.rounds):
        for batch in args.batch_sizes:
            for label, run in runs:
                tokens, seconds = timed(lambda r=run, b=batch: r(prompts[:b]))
                best[(label, batch)] = max(best.get((label, batch), 0.0), tokens / seconds)
                print(
                    f"{label:>18} batch {batch:>3}: {tokens / seconds:7.1f} tokens/s",
                    file=sys.stderr,
                )
    flops = max(flops, matmul_peak("cpu", torch.float32))

    table = Table(
        title=f"{args.model}: tokens/s, {args.new_tokens} new tokens per sample, "
        f"{args.threads} threads, best of {args.rounds} round(s)"
    )
    table.add_column("engine", no_wrap=True)
    for batch in args.batch_sizes:
        table.add_column(f"batch {batch}", justify="right")
        table.add_column("x generate", justify="right")
    for label, _ in runs:
        cells = []
        for batch in args.batch_sizes:
            value = best[(label, batch)]
            cells += [f"{value:.1f}", f"{value / best[('generate', batch)]:.2f}"]
        table.add_row(label, *cells)
    limit = flops / (2 * params)
    table.add_row("compute-bound limit", *[f"{limit:.0f}", ""] * len(args.batch_sizes))
    Console().print(table)
    print(
        f"limit: fp32 matmul {flops / 1e9:.0f} GFLOP/s (best of two 1 s runs) / "
        f"(2 x {params / 1e6:.1f}M params) FLOPs per token",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
