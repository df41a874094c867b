"""The FLOP model against hand counts and torch's FlopCounterMode, the step's FLOP account,
and the run's matmul peak."""

from __future__ import annotations

import doctest
import json
from pathlib import Path

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

import rollcli.tracking.flops as flops_module
import rollcli.tracking.peak as peak_module
import rollcli.tracking.step_perf as step_perf_module
from rollcli.config.errors import ConfigError
from rollcli.config.loader import load_recipe
from rollcli.models.registry import get_model_spec
from rollcli.models.spec import ModelSpec
from rollcli.planning.from_recipe import model_spec
from rollcli.rollout.result import build_batch
from rollcli.runs.run_dir import RunDir
from rollcli.tracking.flops import FlopModel, Group
from rollcli.tracking.peak import PEAK_FILE, device_name, machine_peak, matmul_peak, run_peak
from rollcli.tracking.step_perf import RLStepWork, RunPerf, perf_metrics, rollout_groups

# 2 layers, hidden 8, 2 query heads and 1 key/value head of 4, MLP 16, vocab 10
TINY = ModelSpec(
    name="t",
    hf_id="",
    source="random",
    architecture="llama",
    num_layers=2,
    hidden_size=8,
    intermediate_size=16,
    num_attention_heads=2,
    num_kv_heads=1,
    head_dim=4,
    vocab_size=10,
    tie_word_embeddings=True,
    max_position_embeddings=64,
)
# per token: 2 layers x (q, o: 8x8 each; k, v: 8x4 each; gate, up, down: 8x16 each)
PER_TOKEN = 2 * (2 * 8 * 8 + 2 * 8 * 4 + 3 * 8 * 16)  # 1152
HEAD = 8 * 10  # one position's logits
ATTN = 2 * 2 * 2 * 8  # 2 x 2 x layers x q_dim, per key a token sees
GROUP = Group(prompt=3, responses=(2, 4))


def flops(tokens: int, context: int, head: int) -> int:
    return 2 * PER_TOKEN * tokens + 2 * HEAD * head + ATTN * context


def test_generate_by_hand() -> None:
    # prefill: positions 0-2 see 1+2+3 = 6 keys, logits at position 2 only;
    # response of 2: its first token fed back at position 3 (4 keys), logits there;
    # response of 4: three tokens fed back at positions 3, 4, 5 (4+5+6 = 15 keys)
    expected = flops(tokens=3 + 1 + 3, context=6 + 4 + 15, head=1 + 1 + 3)
    assert expected == 18528
    assert FlopModel.from_spec(TINY).generate([GROUP]) == expected


def test_logprob_forward_by_hand_plain_and_shared_prefix() -> None:
    model = FlopModel.from_spec(TINY)
    # plain rows [p | r]: 5 and 7 positions, 15 + 28 keys, logits at the 6 response tokens
    assert model.logprobs([GROUP], shared_prefix=False) == flops(12, 15 + 28, 6) == 31360
    # shared prefix: the prompt once (6 keys), responses see the same keys as in their rows
    assert model.logprobs([GROUP], shared_prefix=True) == flops(9, 6 + 9 + 22, 6) == 24064
    # a critic: no LM head
    assert model.logprobs([GROUP], shared_prefix=True, head=False) == flops(9, 37, 0)
    # whole sequences (SFT): each causal on its own
    assert model.sequences([5, 7], head_tokens=6) == flops(12, 43, 6)


def test_moe_counts_the_routed_experts_only() -> None:
    spec = get_model_spec("qwen3-30b-a3b")
    model = FlopModel.from_spec(spec)
    # the model card's 3.3 B activated parameters: per-token weights, head and embedding
    active = model.params_per_token + 2 * spec.hidden_size * spec.vocab_size
    assert 3.2e9 < active < 3.4e9


def _counted(model: torch.nn.Module, length: int) -> int:
    ids = torch.randint(0, model.config.vocab_size, (1, length))
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(input_ids=ids)
    return counter.get_total_flops()


def test_agrees_with_flop_counter_on_the_tiny_random_model(tiny_model: Path) -> None:
    """FlopCounterMode counts eager attention's full (masked) L x L score and value matmuls,
    so with `context` = L x L the model must match it; the useful causal count is half."""
    model = AutoModelForCausalLM.from_pretrained(tiny_model, attn_implementation="eager")
    flop_model = FlopModel.from_spec(model_spec(str(tiny_model)))
    length = 32
    counted = _counted(model.eval(), length)
    modelled = flop_model.forward(tokens=length, context=length**2, head_tokens=length)
    assert modelled == pytest.approx(counted, rel=0.01)


def test_agrees_with_flop_counter_where_attention_matters() -> None:
    """A small vocabulary and a long row: attention is 30% of the FLOPs here."""
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        tie_word_embeddings=True,
        attn_implementation="eager",
    )
    model = LlamaForCausalLM(config).eval()
    spec = ModelSpec(
        name="x", hf_id="", source="random", architecture="llama", num_layers=2,
        hidden_size=64, intermediate_size=128, num_attention_heads=4, num_kv_heads=2,
        head_dim=16, vocab_size=64, tie_word_embeddings=True, max_position_embeddings=512,
    )  # fmt: skip
    flop_model = FlopModel.from_spec(spec)
    length = 128
    counted = _counted(model, length)
    attention = flop_model.forward(tokens=0, context=length**2, head_tokens=0)
    assert attention > 0.25 * counted
    modelled = flop_model.forward(tokens=length, context=length**2, head_tokens=length)
    assert modelled == pytest.approx(counted, rel=0.01)


def test_rollout_groups_read_real_lengths_from_a_batch() -> None:
    prompts = [[5, 6, 7]] * 2 + [[9]] * 2  # two GRPO groups of 2, prompts left-padded
    responses = [[1, 2], [1, 2, 3, 4], [3], []]
    batch = build_batch(prompts, responses, [0.0] * 4, [True] * 4, pad_id=0, fields={})
    assert rollout_groups(batch) == [Group(3, (2, 4)), Group(1, (1, 0))]


def test_a_ppo_step_with_lora_counts_each_pass() -> None:
    model = FlopModel.from_spec(TINY)
    work = RLStepWork(
        reference=True, old_logprobs=True, critic=True, epochs=2, shared_prefix=True, lora=True
    )
    actor = model.logprobs([GROUP], shared_prefix=True)
    critic = model.logprobs([GROUP], shared_prefix=True, head=False)
    assert work.flops(model, [GROUP]) == {
        "generate": model.generate([GROUP]),
        "forward": 2 * actor + critic,  # reference and old log-probs, values
        "train": 2 * 2 * actor + 2 * 3 * critic,  # LoRA: frozen weights need no weight grads
    }


def test_perf_metrics_divide_by_time_peak_and_devices() -> None:
    out = perf_metrics(
        {"generate": 4e9, "forward": 1e9, "train": 9e9},
        {"generate": 2.0, "forward": 0.0, "train": 3.0},
        peak_flops=2e9,
        devices={"train": 3},
    )
    assert out == {
        "perf/peak_gflops": 2.0,
        "perf/generate_gflop": 4.0,
        "perf/generate_mfu": 1.0,  # 4e9 / (2 s x 2e9)
        "perf/forward_gflop": 1.0,  # no time: no MFU
        "perf/train_gflop": 9.0,
        "perf/train_mfu": 0.5,  # 9e9 / (3 s x 2e9 x 3 devices)
    }


def test_the_peak_is_measured_once_per_run_folder(tmp_path: Path) -> None:
    calls = []

    def measure() -> dict:
        calls.append(1)
        return {"flops": 5e10, "device": "cpu", "dtype": "float32"}

    first = run_peak(tmp_path, None, measure)
    again = run_peak(tmp_path, None, measure)
    assert (
        first == again == {"flops": 5e10, "device": "cpu", "dtype": "float32", "source": "measured"}
    )
    assert calls == [1]
    assert json.loads((tmp_path / PEAK_FILE).read_text())["flops"] == 5e10
    assert run_peak(tmp_path, 1e12, measure) == {"flops": 1e12, "source": "run.peak_flops"}


def test_a_phase_faster_than_a_busy_probe_raises_the_peak(tmp_path: Path) -> None:
    """The issue's numbers: a probe of 66.8 GFLOP/s on a busy 2-core machine, then a step
    whose train phase ran 79.7 GFLOP/s (MFU 119.3%) and forward 72.7 (108.9%)."""
    run = RunDir.create(tmp_path, "run-busy", "name: x\n")
    measured = {"flops": 66.8e9, "device": "cpu", "dtype": "float32", "source": "measured"}
    perf = RunPerf(FlopModel.from_spec(TINY), 66.8e9, run=run, peak=measured)
    step = {"step": 3, "time/train_s": 2.0, "time/forward_s": 1.0, "time/generate_s": 4.0}
    out = perf.step_metrics({"generate": 40e9, "forward": 72.7e9, "train": 159.4e9}, step)
    assert out["perf/peak_gflops"] == pytest.approx(79.7)
    assert out["perf/train_mfu"] == pytest.approx(1.0)
    assert out["perf/forward_mfu"] == pytest.approx(72.7 / 79.7)
    assert out["perf/generate_mfu"] == pytest.approx(10.0 / 79.7)
    record = json.loads((run.root / PEAK_FILE).read_text())
    assert record["flops"] == pytest.approx(79.7e9)
    assert record["source"] == "raised: step 3's train phase ran at 79.7 GFLOP/s"
    assert (record["measured_flops"], record["measured_source"]) == (66.8e9, "measured")
    assert record["device"] == "cpu"
    events = (run.root / "events.log").read_text()
    assert "step 3's train phase ran at 79.7 GFLOP/s per device, faster than the matmul" in events
    assert "raised to 79.7 GFLOP/s, so perf/*_mfu stays at most 100%" in events
    # a resumed run reads the raised figure; a slower step leaves it alone
    assert run_peak(run.root, None, lambda: {})["flops"] == pytest.approx(79.7e9)
    slower = perf.step_metrics({"train": 100e9}, {"step": 4, "time/train_s": 2.0})
    assert slower["perf/train_mfu"] == pytest.approx(50 / 79.7)
    assert events == (run.root / "events.log").read_text()


def test_matmul_peak_times_a_real_matmul() -> None:
    peak = matmul_peak("cpu", size=256, seconds=0.05)
    assert 1e8 < peak < 1e14  # 0.1 GFLOP/s to 100 TFLOP/s: a CPU's range


@pytest.mark.parametrize("module", [flops_module, step_perf_module, peak_module])
def test_docstring_examples(module) -> None:  # noqa: ANN001
    assert doctest.testmod(module).failed == 0


def test_run_peak_flops_is_taken_where_perf_is_logged_and_refused_elsewhere() -> None:
    assert load_recipe("rlvr-math", ["run.peak_flops=2e11"])[0].run.peak_flops == 2e11
    assert load_recipe("sft", ["run.peak_flops=2e11"])[0].run.peak_flops == 2e11
    with pytest.raises(ConfigError) as err:
        load_recipe("dpo", ["run.peak_flops=2e11"])
    assert "the dpo pipeline does not log yet" in str(err.value)
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="run.peak_flops"):
        load_recipe("rlvr-math", ["run.peak_flops=0"])


def test_the_machine_peak_is_measured_once_and_raised_by_a_faster_phase(tmp_path: Path) -> None:
    """The first run on a machine measures and caches its figure; a later run reuses it
    (no probe); a different dtype is another entry; a phase that ran faster raises it."""
    import torch

    first = machine_peak("cpu", seconds=0.05, cache=tmp_path)
    assert first["cached"] is False and first["flops"] > 1e8
    (entry,) = tmp_path.glob("*.json")
    key = json.loads(entry.read_text())["key"]
    assert key["dtype"] == "float32" and key["threads"] == torch.get_num_threads()
    assert key["device"] == device_name("cpu") and key["torch"] == torch.__version__

    again = machine_peak("cpu", seconds=0.05, cache=tmp_path)
    assert again == {**first, "cached": True}  # the same figure, read back

    other = machine_peak("cpu", torch.bfloat16, seconds=0.05, cache=tmp_path)
    assert other["cached"] is False and len(list(tmp_path.glob("*.json"))) == 2

    run = RunDir.create(tmp_path / "runs", "run-raise", "name: x\n")
    peak = {**again, "flops": 1e9, "source": "measured"}  # as if the probe had read 1 GFLOP/s
    entry.write_text(json.dumps({**json.loads(entry.read_text()), "flops": 1e9}))
    perf = RunPerf(FlopModel.from_spec(TINY), 1e9, run=run, peak=peak)
    perf.step_metrics({"train": 6e9}, {"step": 1, "time/train_s": 2.0})  # 3 GFLOP/s
    assert machine_peak("cpu", seconds=0.05, cache=tmp_path)["flops"] == pytest.approx(3e9)
    perf.step_metrics({"train": 2e9}, {"step": 2, "time/train_s": 2.0})  # slower: left alone
    assert json.loads(entry.read_text())["flops"] == pytest.approx(3e9)
