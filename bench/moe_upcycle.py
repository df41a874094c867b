"""The upcycled MoE answers as the embedded model does: smollm2-135m vs smollm2-135m-moe.

    .venv/bin/python bench/moe_upcycle.py                    # rlvr-math's 256 held-out problems
    .venv/bin/python bench/moe_upcycle.py --recipe rlvr-gsm8k --data ../shared/data/gsm8k
    .venv/bin/python bench/moe_upcycle.py --recipe rlvr-gsm8k --data ../shared/data/gsm8k \
        --n 16 --max-new-tokens 64                           # quick

`smollm2-135m-moe` (rollcli/models/upcycle.py) is the embedded model with each MLP copied
into 4 experts, 2 a token with renormalised weights, so it should compute the same function.
Both models greedy-decode the same held-out problems of a recipe (default `rlvr-math`, which
`rlvr-math-moe` trains: its prompt template, its seeded held-out set, its `max_new_tokens`;
`--recipe rlvr-gsm8k --data FOLDER` reads GSM8K's train/test.jsonl from a local copy of
openai/gsm8k instead, 512 new tokens) through roll's own hf engine (`HFInferEngine`,
temperature 0, fp32). Prints each model's
accuracy (math-verify against the reference answer) and time, the largest difference of the
two models' logits at step 0 (the prompt's last position), the experts' share of each
layer's token x top-2 slots over prompts and the MoE's answers, and, last, the share of
problems whose greedy answers are identical token for token.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from rollcli.config.loader import load_recipe
from rollcli.data.prompt_sets import fit_prompts
from rollcli.evaluation.rlvr_eval import held_out_problems
from rollcli.models.loading import resolve_model
from rollcli.rewards.math_rule import verify_answer
from rollcli.strategies.hf_infer import HFInferEngine
from rollcli.strategies.hf_model import load_causal_lm, load_tokenizer
from rollcli.strategies.sampling import SamplingParams
from rollcli.strategies.threads import set_threads
from rollcli.workers.generation import eos_token_ids

DENSE, MOE = "smollm2-135m", "smollm2-135m-moe"


def greedy(model, tokenizer, ids: list[list[int]], budget: int) -> tuple[list, float]:  # noqa: ANN001
    """Each prompt's greedy answer (token ids) from roll's hf engine, and the seconds taken."""
    engine = HFInferEngine(model, eos_token_ids(model, tokenizer), tokenizer.pad_token_id)
    engine.generate(ids[:1], SamplingParams(max_new_tokens=2, temperature=0.0))  # warm up
    start = time.perf_counter()
    gens = engine.generate(ids, SamplingParams(max_new_tokens=budget, temperature=0.0))
    seconds = time.perf_counter() - start
    answers = [[] for _ in ids]
    for gen in gens:
        answers[gen.prompt_index] = gen.token_ids
    return answers, seconds


@torch.no_grad()
def step0_and_load(dense, moe, ids: list, answers: list) -> tuple[float, torch.Tensor]:  # noqa: ANN001
    """The largest |logit difference| at step 0 over the prompts, and each expert's share of
    each layer's top-k slots over the prompts and the MoE's answers ([layers, experts])."""
    experts, top_k = moe.config.num_local_experts, moe.config.num_experts_per_tok
    slots = torch.zeros(moe.config.num_hidden_layers, experts)
    worst = 0.0
    for prompt, answer in zip(ids, answers, strict=True):
        out = moe(input_ids=torch.tensor([prompt + answer]), output_router_logits=True)
        first = dense(input_ids=torch.tensor([prompt])).logits[0, -1]
        worst = max(worst, (out.logits[0, len(prompt) - 1] - first).abs().max().item())
        for layer, logits in enumerate(out.router_logits):
            chosen = logits.topk(top_k, dim=-1).indices.flatten()
            slots[layer] += torch.bincount(chosen, minlength=experts)
    return worst, slots / slots.sum(dim=1, keepdim=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--recipe", default="rlvr-math")
    parser.add_argument("--data", type=Path, default=None, help="a folder of train/test.jsonl")
    parser.add_argument("--n", type=int, default=256, help="held-out problems")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="default: the recipe's")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()

    set_threads(args.threads)
    data = []
    if args.data is not None:
        data = [
            f"data.path={args.data / 'train.jsonl'}",
            f"data.val_path={args.data / 'test.jsonl'}",
        ]
    cfg, _ = load_recipe(args.recipe, data)
    budget = args.max_new_tokens or cfg.rollout.val_max_new_tokens or cfg.rollout.max_new_tokens
    tokenizer = load_tokenizer(resolve_model(DENSE))
    problems = held_out_problems(cfg, args.n, cfg.seed)
    problems, ids, _ = fit_prompts(tokenizer, problems, cfg.data.max_prompt_tokens)
    print(
        f"{len(problems)} held-out problems of {args.recipe}, up to {budget} new tokens",
        file=sys.stderr,
    )

    models, answers, rows = {}, {}, []
    for name in (DENSE, MOE):
        path = resolve_model(name)
        models[name] = load_causal_lm(path)
        assert load_tokenizer(path).get_vocab() == tokenizer.get_vocab()  # one tokenizer
        answers[name], seconds = greedy(models[name], tokenizer, ids, budget)
        texts = [tokenizer.decode(a, skip_special_tokens=True) for a in answers[name]]
        correct = sum(verify_answer(t, p.answer) for t, p in zip(texts, problems, strict=True))
        tokens = sum(len(a) for a in answers[name])
        rows.append((name, correct, tokens, seconds))
        print(
            f"{name}: {correct}/{len(problems)} correct, {tokens} tokens in {seconds:.0f} s",
            file=sys.stderr,
        )
    worst, share = step0_and_load(models[DENSE], models[MOE], ids, answers[MOE])
    same = [a == b for a, b in zip(answers[DENSE], answers[MOE], strict=True)]

    table = Table(
        title=f"{len(problems)} held-out {args.recipe} problems, greedy, hf engine, "
        f"{args.threads} threads"
    )
    for column in ("model", "accuracy", "tokens", "seconds", "tokens/s"):
        table.add_column(column, justify="left" if column == "model" else "right")
    for name, correct, tokens, seconds in rows:
        table.add_row(
            name,
            f"{correct / len(problems):.3f}",
            f"{tokens:,}",
            f"{seconds:.0f}",
            f"{tokens / seconds:.1f}",
        )
    Console().print(table)
    per_layer = share.min(dim=1).values
    print(f"max |logit difference| at step 0: {worst:.2e}")
    print(
        f"expert load: each expert {share.min():.1%}-{share.max():.1%} of a layer's top-2 "
        f"slots (25% even; the lowest expert's mean over layers {per_layer.mean():.1%})"
    )
    differ = [i for i, s in enumerate(same) if not s]
    if differ:
        first = [
            next(
                (
                    k
                    for k, (x, y) in enumerate(
                        zip(answers[DENSE][i], answers[MOE][i], strict=False)
                    )
                    if x != y
                ),
                None,
            )
            for i in differ
        ]
        print(f"answers that differ: problems {differ}, first different token at {first}")
    print(f"identical greedy answers: {sum(same)}/{len(same)} = {sum(same) / len(same):.3f}")


if __name__ == "__main__":
    main()
