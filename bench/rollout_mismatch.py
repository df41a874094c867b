"""Sampler-vs-trainer mismatch of each `rollout.precision`: how far the log-probs a
low-precision engine reports for its own samples are from the fp32 trainer's.

    .venv/bin/python bench/rollout_mismatch.py                 # smollm2-135m, 16 prompts x 4
    .venv/bin/python bench/rollout_mismatch.py --model tiny-random --prompts 4

Each row samples the same chat prompts (rlvr-math-like sums, temperature 1, a fixed seed)
with roll's hf engine in one precision, then scores the sampled tokens with the fp32 model
(`response_logprobs`, as the trainer does). Per sampled token, gap = log mu - log pi (the
engine's minus the trainer's): its mean, mean |gap|, the largest, the fraction of tokens
with |gap| > 0.2 (outside IcePop's band [0.8, 1.25] of the ratio, about) and the k3
estimate of KL(mu || pi). `int8` is the engine as a run uses it after its first call
(smoothed by the inputs that call saw: 8 other prompts here); `int8 unsmoothed` is its
first call (per-row scales only). `int8 per-tensor` is fbgemm's dynamic int8 linear (activations
scaled per tensor, what `torch.ao.quantization.quantize_dynamic` runs), for comparison
with roll's per-row int8; it is not a `rollout.precision`.
"""

from __future__ import annotations

import argparse
import functools
import os
import warnings

import torch
from rich.console import Console
from rich.table import Table
from rollout import chat_prompts  # bench/rollout.py (this folder is on sys.path)

from rollcli.data.padding import rollout_tensors
from rollcli.models.loading import resolve_model
from rollcli.strategies.hf_infer import HFInferEngine
from rollcli.strategies.hf_model import load_causal_lm, load_tokenizer, response_logprobs
from rollcli.strategies.sampling import SamplingParams
from rollcli.strategies.threads import set_threads

VARIANTS = ("fp32", "bf16", "int8", "int8 unsmoothed", "int8 per-tensor")
QUESTION = "What is {a} + {b}? Put the answer in <answer></answer>."
WARM_UP = "Compute {a} - {b} and explain."  # the int8 engine's first call: other prompts


def per_tensor_int8(model: torch.nn.Module) -> None:
    """fbgemm's dynamic int8 linears (per-row weights, per-tensor activations) in place."""
    for m in model.modules():
        if type(m) is torch.nn.Linear:
            w = m.weight.detach().float()
            scale = (w.abs().amax(dim=1) / 127).clamp_min(1e-12).double()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch's quantized tensors are deprecated
                q = torch.quantize_per_channel(
                    w, scale, torch.zeros(len(scale), dtype=torch.long), 0, torch.qint8
                )
                packed = torch.ops.quantized.linear_prepack(q, m.bias)
            m.forward = functools.partial(torch.ops.quantized.linear_dynamic, W_prepack=packed)


def engine(path, variant: str, eos: int, pad: int) -> HFInferEngine:
    dtype = torch.bfloat16 if variant == "bf16" else torch.float32
    model = load_causal_lm(path, dtype=dtype)
    if variant == "int8 per-tensor":
        per_tensor_int8(model)
        out = HFInferEngine(model, [eos], pad)
        out._head = None  # the head's forward is the int8 one
        return out
    return HFInferEngine(model, [eos], pad, int8=variant.startswith("int8"))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--samples", type=int, default=4, help="per prompt")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()

    set_threads(args.threads)
    path = resolve_model(args.model)
    tok = load_tokenizer(path)
    trainer = load_causal_lm(path)
    prompts = chat_prompts(tok, args.prompts, QUESTION, a=23)
    params = SamplingParams(n=args.samples, max_new_tokens=args.new_tokens, temperature=1.0, seed=7)
    table = Table(title=f"{args.model}: engine log-prob minus fp32 trainer's, per sampled token")
    for column in (
        "precision",
        "tokens",
        "mean gap",
        "mean |gap|",
        "max |gap|",
        "|gap|>0.2",
        "KL k3",
    ):
        table.add_column(column, justify="right" if column != "precision" else "left")
    means = {}
    warm_up = chat_prompts(tok, 8, WARM_UP, a=57)
    for variant in args.variants:
        sampler = engine(path, variant, tok.eos_token_id, tok.pad_token_id)
        if variant == "int8":  # as in a run after its first rollout: smoothed by what it saw
            sampler.generate(warm_up, SamplingParams(n=2, max_new_tokens=48, seed=3))
        gens = sampler.generate(prompts, params)
        tensors = rollout_tensors(
            [prompts[g.prompt_index] for g in gens], [g.token_ids for g in gens], 0
        )
        with torch.no_grad():
            lp, _ = response_logprobs(trainer, tensors, temperature=1.0)
        gap = torch.cat(
            [torch.tensor(g.logprobs) - lp[i, : len(g.token_ids)] for i, g in enumerate(gens)]
        )
        log_ratio = -gap  # log pi - log mu
        k3 = (log_ratio.exp() - 1 - log_ratio).mean()  # E_mu[r - 1 - log r] = KL(mu || pi)
        means[variant] = gap.abs().mean().item()
        table.add_row(
            variant,
            str(gap.numel()),
            f"{gap.mean():+.4f}",
            f"{gap.abs().mean():.4f}",
            f"{gap.abs().max():.3f}",
            f"{(gap.abs() > 0.2).float().mean():.3f}",
            f"{k3:.4f}",
        )
    Console().print(table)
    if "int8" in means and "bf16" in means and means["bf16"] > 0:
        print(f"int8 / bf16 mean |gap|: {means['int8'] / means['bf16']:.2f}")


if __name__ == "__main__":
    main()
