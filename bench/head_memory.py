"""Peak memory of one training forward + backward: the chunked LM head vs whole logits.

    .venv/bin/python bench/head_memory.py                       # smollm2-135m
    .venv/bin/python bench/head_memory.py --model tiny-random --shapes 2x64

Each case runs in a fresh process (so peaks do not mix): load the model for training, run
the policy loss's forward (log-prob of every response token and the entropy) over rows of
`ROWSxTOKENS` random tokens, the last three quarters of each row a response, and backward.
`chunked` is roll's path (`rollcli.strategies.lm_head`: the head a chunk of positions at a
time, each chunk recomputed in backward); `whole logits` builds the `[B, R, V]` logits in one
forward, which is what models with scaled or capped heads still do. Prints the peak RSS above
the loaded model and the time of each case.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

from rich.console import Console
from rich.table import Table

PATHS = ("chunked", "whole logits")


def _case(model_ref: str, rows: int, tokens: int, path: str, checkpointing: bool) -> dict:
    import torch

    from rollcli.algorithms.entropy import entropy_from_logits, logprobs_from_logits
    from rollcli.models.loading import resolve_model
    from rollcli.strategies.hf_model import load_causal_lm, response_logits, response_logprobs

    model = load_causal_lm(resolve_model(model_ref), train=True)
    if checkpointing:
        model.gradient_checkpointing_enable()
    torch.manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (rows, tokens))
    width = tokens // 4
    tensors = {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "position_ids": torch.arange(tokens).expand(rows, tokens),
        "prompt_width": torch.full((rows,), width),
    }
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    if path == "chunked":
        logprobs, entropy = response_logprobs(model, tensors, with_entropy=True)
    else:
        logits = response_logits(
            model, ids, tensors["attention_mask"], tensors["position_ids"], width
        )
        logprobs = logprobs_from_logits(logits, ids[:, width:])
        entropy = entropy_from_logits(logits)
    (-(logprobs.mean()) - 0.01 * entropy.mean()).backward()
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"extra_gib": (peak - base) / 2**20, "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument(
        "--shapes",
        nargs="+",
        default=["16x192", "2x2048"],
        help="ROWSxTOKENS per forward (default: a GRPO micro-batch, an agentic one)",
    )
    parser.add_argument("--case", help=argparse.SUPPRESS)  # internal: one case, JSON out
    args = parser.parse_args()
    if args.case:
        rows, tokens, path, ckpt = json.loads(args.case)
        print(json.dumps(_case(args.model, rows, tokens, path, ckpt)))
        return

    table = Table(title=f"one forward + backward of the policy loss, {args.model}")
    for col in ("rows x tokens", "grad. checkpointing", "head", "peak RSS above model", "time"):
        table.add_column(col, justify="right")
    for shape in args.shapes:
        rows, tokens = (int(x) for x in shape.split("x"))
        for ckpt in (False, True):
            for path in PATHS:
                case = json.dumps([rows, tokens, path, ckpt])
                cmd = [sys.executable, __file__, "--model", args.model, "--case", case]
                out = subprocess.run(cmd, capture_output=True, text=True)
                if out.returncode != 0:
                    cells = ["failed: " + (out.stderr.strip().splitlines() or ["?"])[-1], ""]
                else:
                    r = json.loads(out.stdout.strip().splitlines()[-1])
                    cells = [f"{r['extra_gib']:.2f} GiB", f"{r['seconds']:.1f} s"]
                table.add_row(shape, "on" if ckpt else "off", path, *cells)
    Console().print(table)


if __name__ == "__main__":
    main()
