"""Peak memory of one CPU worker at a plan's shape: the real worker classes (no Ray) on the
embedded model with synthetic tokens, each role in a fresh process, its PSS sampled every
0.05 s (`rollcli.runs.peak_memory.pss_bytes`). Prints the process's PSS before the model
loads (the runtime), after, and at its peak, beside the plan's figures for that shape.

    python bench/role_memory.py train  --rows 16 --prompt 256 --response 32 [--tokens 4096]
    python bench/role_memory.py forward --rows 16 --prompt 256 --response 32 [--tokens 4096]
    python bench/role_memory.py generate --rows 32 --prompt 256 --response 32
    python bench/role_memory.py train --rows 8 --prompt 256 --response 480 --tokens 4096 \
        --group 8 --scored 0.25     # an agentic map's 8 episodes behind one first prompt

Used for the CPU memory model's numbers in docs/planning.md ("On the CPU").
"""

from __future__ import annotations

import argparse
import os
import threading
import time

MiB = 2**20


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=("train", "forward", "generate"))
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--prompt", type=int, default=256)
    ap.add_argument("--response", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=None, help="train.micro_batch_tokens")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--group", type=int, default=1, help="rows sharing a prompt, packed (train.shared_prefix)"
    )
    ap.add_argument(
        "--scored", type=float, default=1.0, help="share of response tokens the model wrote"
    )
    args = ap.parse_args()

    from rollcli.runs.peak_memory import pss_bytes

    pid = os.getpid()
    peak = [pss_bytes(pid) or 0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.05):
            peak[0] = max(peak[0], pss_bytes(pid) or 0)

    import torch

    from rollcli.models.loading import resolve_model

    path = str(resolve_model("smollm2-135m"))
    g = torch.Generator().manual_seed(0)
    prompts = torch.randint(100, 49000, (args.rows, args.prompt), generator=g)
    if args.group > 1:  # each group's rows share its first row's prompt
        prompts = prompts[torch.arange(args.rows) // args.group * args.group]
    prompts = prompts.tolist()
    responses = torch.randint(100, 49000, (args.rows, args.response), generator=g).tolist()
    runtime = pss_bytes(pid)
    threading.Thread(target=sample, daemon=True).start()
    t0 = time.perf_counter()
    if args.role == "generate":
        from rollcli.strategies.sampling import SamplingParams
        from rollcli.workers.actor_infer import ActorInferArgs, ActorInferWorker

        worker = ActorInferWorker(ActorInferArgs(path, num_threads=args.threads))
        loaded = pss_bytes(pid)
        params = SamplingParams(n=1, max_new_tokens=args.response, temperature=1.0, seed=1)
        out = worker.generate(prompts, params)
        print("generated", sum(len(o["token_ids"]) for o in out), "tokens")
    else:
        from rollcli.data.batch import Batch
        from rollcli.data.padding import rollout_tensors

        if args.role == "forward":
            from rollcli.workers.reference import ReferenceArgs, ReferenceWorker

            worker = ReferenceWorker(ReferenceArgs(path, num_threads=args.threads))
        else:
            from rollcli.strategies.trainer import TrainerArgs
            from rollcli.workers.actor_train import ActorTrainWorker
            from rollcli.workers.trained_model import TrainedModelArgs

            worker = ActorTrainWorker(
                TrainedModelArgs(path, trainer=TrainerArgs(lr=1e-6), num_threads=args.threads)
            )
        loaded = pss_bytes(pid)
        batch = Batch(rollout_tensors(prompts, responses, 0))
        if args.role == "forward":
            worker.compute_logprobs(batch, micro_batch_size=args.rows, max_tokens=args.tokens)
        else:
            from rollcli.algorithms.update_args import PolicyUpdateArgs

            if args.scored < 1.0:  # env observations between the turns are not trained on
                width = batch["response_mask"].shape[1]
                turn = torch.arange(width) % 40 < 40 * args.scored
                batch.set("response_mask", batch["response_mask"] * turn.float())
            batch.set("advantages", batch["response_mask"].float())
            batch.set("old_logprobs", torch.zeros(batch["response_mask"].shape))
            update = PolicyUpdateArgs(
                loss_agg="token-mean",  # as measured before it took the recipe's default
                micro_batch_size=args.rows,
                micro_batch_tokens=args.tokens,
                shared_prefix=args.group > 1,
            )
            for step in (1, 2):  # Adam's states exist from the first step's end
                worker.train_step(batch, update)
                print(f"after step {step}: peak {peak[0] / MiB:.0f} MiB", flush=True)
    stop.set()
    time.sleep(0.1)
    peak[0] = max(peak[0], pss_bytes(pid) or 0)
    print(
        f"{args.role} rows={args.rows} prompt={args.prompt} response={args.response} "
        f"tokens={args.tokens}: runtime {runtime / MiB:.0f} MiB, loaded {loaded / MiB:.0f} MiB, "
        f"peak {peak[0] / MiB:.0f} MiB ({time.perf_counter() - t0:.0f} s)"
    )


if __name__ == "__main__":
    main()
