"""The tool env's expert, which `agentic-tool-math`'s warm-up imitates: `roll data episodes
tool` plays a calculator call on each task's expression and answers its result, solving
every training task; the conversations it writes, tokenized by the SFT data path, are the
token ids an RL run of the recipe builds for the same replies."""

from __future__ import annotations

import json
from pathlib import Path

from error_text import error_message
from typer.testing import CliRunner

from rollcli.cli.app import app
from rollcli.config.loader import load_recipe
from rollcli.data.chat import tokenize_chat
from rollcli.distributed.calls import Done
from rollcli.envs.layout_split import layout_split
from rollcli.envs.tools.call_format import tool_response
from rollcli.envs.tools.tasks import arithmetic_expression
from rollcli.rollout.agentic_setup import env_kwargs, limits
from rollcli.rollout.chat_turns import TurnFormat
from rollcli.rollout.episode import EpisodeSpec
from rollcli.rollout.episode_scheduler import play_episodes
from rollcli.strategies.hf_model import load_tokenizer
from rollcli.workers.env_worker import EnvArgs, EnvWorker

runner = CliRunner()
N = 24


class ExpertTokens:
    """The expert's replies as an engine returns a reply the model generated: its token ids
    ending in EOS (what a model that learned the demonstrations samples)."""

    free, width = True, 1

    def __init__(self, host: EnvWorker, tokenizer) -> None:
        self.host, self.tokenizer = host, tokenizer

    def submit(self, episodes):
        out = []
        for ep in episodes:
            text = self.host.envs[ep.spec.index].expert_reply()
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            out.append({"token_ids": [*ids, self.tokenizer.eos_token_id], "text": text})
        return 0, Done(out)

    def collect(self, rank, handle):
        return handle.value

    def end(self, episode) -> None:
        pass

    def close(self) -> None:
        pass


def test_expert_tool_episodes_solve_training_tasks_in_the_rl_token_format(
    tmp_path: Path, tiny_model: Path
) -> None:
    out = tmp_path / "episodes.jsonl"
    args = ["data", "episodes", "tool", "model=tiny-random", "--n", str(N), "--out", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.stderr + str(result.exception)
    assert f"{N} solved, 2.0 moves on average" in " ".join(result.stderr.split())
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    cfg, _ = load_recipe("agentic-tool-math", ["model=tiny-random"])
    tokenizer = load_tokenizer(tiny_model)
    for row in rows:
        _, task, call, result_turn, answer = row["messages"]
        assert layout_split(task["content"]) == "train"  # never a held-out task
        expression = arithmetic_expression(task["content"])
        value = str(eval(expression.replace("×", "*")))  # our own generated text
        arguments = {"name": "calculator", "arguments": {"expression": expression}}
        assert call == {
            "role": "assistant",
            "content": f"<tool_call>\n{json.dumps(arguments, ensure_ascii=False)}\n</tool_call>",
        }
        assert result_turn == {"role": "user", "content": tool_response(value)}  # SmolLM2
        assert answer == {"role": "assistant", "content": f"<answer>{value}</answer>"}
        call_tokens = len(tokenizer(call["content"], add_special_tokens=False)["input_ids"])
        assert call_tokens + 1 <= cfg.rollout.max_new_tokens  # the call and its end of turn

    # the RL side: the recipe's own env worker, turn format and limits, the same seeds
    host = EnvWorker(EnvArgs(cfg.agentic.env, env_kwargs(cfg.agentic)))
    fmt = TurnFormat(
        tokenizer, host.instructions(), cfg.agentic.reply_prefix, cfg.agentic.user_suffix,
        tools=host.tools(),
    )  # fmt: skip
    specs = [EpisodeSpec(i, i, i) for i in range(N)]
    played, _ = play_episodes(
        [host], ExpertTokens(host, tokenizer), specs, fmt,
        limits(cfg.agentic, cfg.rollout.max_new_tokens),
    )  # fmt: skip
    close = fmt.encode(fmt.close_after_eos)  # the template's "\n" after the last <|im_end|>
    for row, ep in zip(rows, played, strict=True):
        assert ep.success and row["messages"] == ep.messages
        ids, mask, cut = tokenize_chat(tokenizer, tuple(row["messages"]), 768)
        assert not cut and ids == ep.context_ids() + close  # token for token
        rl_mask = [0] * len(ep.prompt_ids) + ep.loss_mask + [0] * len(close)
        extra = [i for i, (m, r) in enumerate(zip(mask, rl_mask, strict=True)) if m != r]
        # SFT also trains the newline the template puts after each reply's <|im_end|>
        assert [(mask[i], tokenizer.decode(ids[i - 1 : i + 1])) for i in extra] == [
            (1, "<|im_end|>\n")
        ] * 2


def test_an_expert_that_cannot_follow_the_prompt_is_refused_in_one_line(tmp_path: Path) -> None:
    # every prompt would end with "<answer>", but the expert's first reply is a tool call
    out = tmp_path / "x.jsonl"
    args = ["data", "episodes", "tool", "model=tiny-random", "agentic.reply_prefix=<answer>"]
    result = runner.invoke(app, [*args, "--n", "2", "--out", str(out)])
    assert result.exit_code == 2 and not out.exists()
    message = error_message(result.stderr)
    assert "--policy expert: the scripted reply '<tool_call>" in message
    assert "does not start with agentic.reply_prefix '<answer>'" in message
