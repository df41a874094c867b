"""Shared-prefix vs plain rows: seconds of the actor's forward+backward and of a log-prob
forward on one rollout batch, side by side in one process.

    nice -n 15 .venv/bin/python bench/shared_prefix.py                  # smollm2-135m
    nice -n 15 .venv/bin/python bench/shared_prefix.py --model tiny-random --repeats 1

The batch has rlvr-math's shapes: `--groups` prompts (8) x `--group-size` samples (8),
prompts of `--prompt-tokens` (46), responses of 16 to 46 tokens (mean ~31, seeded), token
ids drawn at random. Both layouts run the code the workers run (`response_logprobs` on
length-sorted micro-batches, `shared_prefix_logprobs` on `shared_prefix_micro_batches`)
with rlvr-math's `train.micro_batch_size` (16) and `micro_batch_tokens` (4096), and a
token-mean loss (log-prob + entropy) split into exact micro-batch shares. The two layouts
alternate, `--repeats` times each; the table gives the median seconds, the tokens each
layout computes and, from the first repeat, the largest log-prob difference and the largest
gradient difference relative to the largest gradient. The last line is the ratio
plain / shared of the forward+backward time (the machine may be busy: compare ratios).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from rich.console import Console
from rich.table import Table

from rollcli.data.batch import Batch
from rollcli.data.micro_batch import length_sorted_micro_batches
from rollcli.data.padding import rollout_tensors
from rollcli.data.shared_prefix import shared_prefix_layout, shared_prefix_micro_batches
from rollcli.models.loading import resolve_model
from rollcli.strategies.hf_model import load_causal_lm, response_logprobs
from rollcli.strategies.hf_shared_prefix import shared_prefix_logprobs
from rollcli.strategies.logprob_forward import model_inputs

LAYOUTS = {
    "plain": (length_sorted_micro_batches, response_logprobs),
    "shared": (shared_prefix_micro_batches, shared_prefix_logprobs),
}


def rollout_batch(args: argparse.Namespace, vocab: int) -> Batch:
    gen = torch.Generator().manual_seed(0)
    prompts, responses = [], []
    for _ in range(args.groups):
        prompt = torch.randint(10, vocab, (args.prompt_tokens,), generator=gen).tolist()
        for _ in range(args.group_size):
            n = int(torch.randint(16, 47, (1,), generator=gen))
            prompts.append(prompt)
            responses.append(torch.randint(10, vocab, (n,), generator=gen).tolist())
    return Batch(rollout_tensors(prompts, responses, pad_id=0))


def tokens(layout: str, batch: Batch, args: argparse.Namespace) -> int:
    """Positions the forward passes compute (rows x padded width, summed over micro-batches)."""
    micro_batches, _ = LAYOUTS[layout]
    total = 0
    for _, micro in micro_batches(batch, args.micro_batch_size, args.micro_batch_tokens):
        if layout == "plain":
            total += micro["input_ids"].numel()
        else:
            m = model_inputs(micro)
            lay = shared_prefix_layout(
                m["input_ids"], m["attention_mask"], m["position_ids"], int(m["prompt_width"][0])
            )
            total += lay.input_ids.numel()
    return total


def train_pass(model, layout: str, batch: Batch, args) -> tuple[float, torch.Tensor]:  # noqa: ANN001
    """Forward+backward over the batch's micro-batches: (seconds, log-probs)."""
    micro_batches, forward = LAYOUTS[layout]
    count = batch["response_mask"].sum()
    model.zero_grad(set_to_none=True)
    out = torch.zeros(batch["response_mask"].shape)
    t0 = time.perf_counter()
    for idx, micro in micro_batches(batch, args.micro_batch_size, args.micro_batch_tokens):
        mask = micro["response_mask"]
        logprobs, entropy = forward(model, model_inputs(micro), with_entropy=True)
        loss = ((logprobs + 0.01 * entropy) * mask).sum() / count
        loss.backward()
        out[idx, : logprobs.shape[1]] = logprobs.detach()
    return time.perf_counter() - t0, out


@torch.no_grad()
def forward_pass(model, layout: str, batch: Batch, args) -> float:  # noqa: ANN001
    micro_batches, forward = LAYOUTS[layout]
    t0 = time.perf_counter()
    for _, micro in micro_batches(batch, args.micro_batch_size, args.micro_batch_tokens):
        forward(model, model_inputs(micro))
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--prompt-tokens", type=int, default=46)
    parser.add_argument("--micro-batch-size", type=int, default=16)
    parser.add_argument("--micro-batch-tokens", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = load_causal_lm(resolve_model(args.model), train=True)
    batch = rollout_batch(args, model.config.vocab_size)
    times: dict[str, dict[str, list[float]]] = {k: {"train": [], "fwd": []} for k in LAYOUTS}
    logprobs, grads = {}, {}
    for r in range(args.repeats):
        for layout in LAYOUTS:
            seconds, lp = train_pass(model, layout, batch, args)
            times[layout]["train"].append(seconds)
            times[layout]["fwd"].append(forward_pass(model, layout, batch, args))
            if r == 0:
                logprobs[layout] = lp
                grads[layout] = [p.grad.clone() for p in model.parameters()]
    lp_diff = float((logprobs["plain"] - logprobs["shared"]).abs().max())
    g_scale = max(float(g.abs().max()) for g in grads["plain"])
    g_diff = max(
        float((a - b).abs().max()) for a, b in zip(grads["plain"], grads["shared"], strict=True)
    )
    table = Table(title=f"{args.model}: {args.groups} x {args.group_size} samples")
    for col in ("layout", "tokens", "fwd+bwd s", "log-prob fwd s"):
        table.add_column(col, justify="right")
    for layout in LAYOUTS:
        table.add_row(
            layout,
            str(tokens(layout, batch, args)),
            f"{statistics.median(times[layout]['train']):.2f}",
            f"{statistics.median(times[layout]['fwd']):.2f}",
        )
    console = Console()
    console.print(table)
    console.print(
        f"max |log-prob diff| {lp_diff:.2e}; max |grad diff| / max |grad| {g_diff / g_scale:.2e}"
    )
    fwd = statistics.median(times["plain"]["fwd"]) / statistics.median(times["shared"]["fwd"])
    console.print(f"log-prob forward plain / shared: {fwd:.2f}x")
    each = [p / q for p, q in zip(times["plain"]["train"], times["shared"]["train"], strict=True)]
    console.print(
        "forward+backward plain / shared per repeat: " + ", ".join(f"{r:.2f}x" for r in each)
    )
    train = statistics.median(times["plain"]["train"]) / statistics.median(times["shared"]["train"])
    console.print(f"forward+backward plain / shared: {train:.2f}x")


if __name__ == "__main__":
    main()
