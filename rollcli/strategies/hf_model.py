"""Loading Hugging Face causal LMs and computing per-token log-probs of responses."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from rollcli.algorithms.entropy import entropy_from_logits, logprobs_from_logits
from rollcli.data.batch_keys import PROMPT_WIDTH
from rollcli.models.shapes import RANDOM_INIT_KEY
from rollcli.strategies.attention_masks import padded_rows_mask
from rollcli.strategies.hf_checkpoint_layout import has_conversions, to_model_layout
from rollcli.strategies.hf_gqa_attention import use_gqa_attention
from rollcli.strategies.lm_head import head_logprobs, plain_head
from rollcli.strategies.routing_replay import batch_routing


def load_causal_lm(
    path: str | Path,
    *,
    dtype: torch.dtype = torch.float32,
    train: bool = False,
    device: torch.device | str = "cpu",
):
    """A causal LM on `device` (a worker's, from `rollcli.strategies.device.pick_device`).
    A shape-only folder (`rollcli.models.shapes`: a config marked for random
    initialisation, no weights) gives a model of random weights, built on `device`."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(str(path))
    if getattr(config, RANDOM_INIT_KEY, False):  # a shape-only folder (models/shapes.py)
        torch.manual_seed(0)
        with torch.device(device):  # built where it runs: a 7B model never sits on the host
            model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    else:
        model = AutoModelForCausalLM.from_pretrained(str(path), config=config, dtype=dtype)
        model = model.to(device)
    # from the start, not when an engine first generates with it: a model shared by the
    # trainer and the engine computes the same numbers before and after its first rollout
    # (a resumed run trains its first step before it generates)
    use_gqa_attention(model)
    model.train(train)
    if not train:
        model.requires_grad_(False)
    return model


_Gaps = tuple[set[str], set[str]]  # (missing, unexpected) tensor names
SAFE_WEIGHTS = "model.safetensors"
SAFE_WEIGHTS_INDEX = "model.safetensors.index.json"  # save_pretrained's shards


def load_saved_weights(model: torch.nn.Module, folder: str | Path, device: str) -> None:
    """Load a Hugging Face folder's safetensors weights into `model`, strictly: one
    `model.safetensors`, or the shards its index lists (`save_pretrained` above
    `max_shard_size`). A tensor missing from every file (tied weights excepted) or one the
    model lacks is a ValueError naming it. An MoE model's folder names its experts one by
    one, as the hub does (hf_checkpoint_layout.py): its files are read whole and fused as
    `from_pretrained` fuses them; other folders are read one shard at a time."""
    folder = Path(folder)
    index = folder / SAFE_WEIGHTS_INDEX
    if index.exists():
        names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        if any(Path(name).name != name for name in names):  # files of this folder only
            raise ValueError(f"{index} lists shards outside its folder: {names}")
        files, source = [folder / name for name in names], index
    else:
        files = [folder / SAFE_WEIGHTS]
        source = files[0]
    load = _load_converted if has_conversions(model) else _load_shards
    missing, unexpected = load(model, files, device)
    if missing or unexpected:
        raise ValueError(
            f"{source} does not match the policy: missing tensors {sorted(missing)}, "
            f"unexpected tensors (or shapes) {sorted(unexpected)}; resume with the run's own "
            "model"
        )


def _load_shards(model: torch.nn.Module, files: list[Path], device: str) -> _Gaps:
    """One file at a time, each filling the tensors it holds: (missing, unexpected)."""
    from safetensors.torch import load_model

    missing: set[str] | None = None
    unexpected: set[str] = set()
    for path in files:
        miss, extra = load_model(model, str(path), strict=False, device=device)
        missing = set(miss) if missing is None else missing & set(miss)
        unexpected |= set(extra)
    return missing or set(), unexpected


def _load_converted(model: torch.nn.Module, files: list[Path], device: str) -> _Gaps:
    """Every file at once, fused to the model's layout: (missing, unexpected names or
    shapes; e.g. an expert missing from the folder makes a fused tensor of fewer experts)."""
    from safetensors.torch import load_file

    tensors: dict[str, torch.Tensor] = {}
    for path in files:
        tensors.update(load_file(str(path), device=device))
    fused, own = to_model_layout(model, tensors), model.state_dict()
    wrong = {n for n, t in fused.items() if n in own and t.shape != own[n].shape}
    if wrong:
        return set(), wrong
    result = model.load_state_dict(fused, strict=False)
    return _untied(model, set(result.missing_keys)), set(result.unexpected_keys)


def _untied(model: torch.nn.Module, missing: set[str]) -> set[str]:
    """The names in `missing` whose parameter no other (loaded) name shares: a tied LM
    head is its embedding, filled when the embedding is."""
    names: dict[int, list[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(name)
    params = dict(model.named_parameters(remove_duplicate=False))
    return {
        n for n in missing if n not in params or all(a in missing for a in names[id(params[n])])
    }


def causal_lm_layout(path: str | Path, *, dtype: torch.dtype = torch.float32):
    """The model's modules and tensor shapes on the meta device: no memory, no weights read.

    What a weight receiver needs to know the names, shapes and order of what it receives
    when the weights themselves live elsewhere (in a vLLM engine).
    """
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(str(path))
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.requires_grad_(False)
    return model


def load_tokenizer(path: str | Path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path))
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def response_logits(
    model, input_ids, attention_mask, position_ids, prompt_width: int
) -> torch.Tensor:
    """Logits that predict the response tokens: `[B, R, V]` for a `[prompt | response]` row.

    Only the last R+1 positions go through the LM head (`logits_to_keep`): prompt positions
    need no logits, and the head is a fifth of a small model's compute.
    """
    response_width = input_ids.shape[1] - prompt_width
    out = model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids,
        use_cache=False,
        logits_to_keep=response_width + 1,
    )
    return out.logits[:, :-1, :]


def response_logprobs(
    model,
    batch_tensors: dict[str, torch.Tensor],
    *,
    temperature: float = 1.0,
    with_entropy: bool = False,
    head_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-prob of every response token under `model` (and optionally the entropy), `[B, R]`.

    Positions past a row's end (attention 0) are 0, and with `head_mask` (`[B, R]`, e.g. the
    loss mask) so are the positions it leaves out: the LM head runs only where it is set (an
    agentic row's environment turns are most of its response and need no log-probs). With a
    plain LM head the logits are built a chunk of positions at a time
    (`rollcli.strategies.lm_head`); other models go through their own forward.
    """
    width = int(batch_tensors[PROMPT_WIDTH][0])
    real = batch_tensors["attention_mask"][:, width:].bool()
    if head_mask is not None:
        real = real & head_mask.bool()
    head = plain_head(model)
    mask = padded_rows_mask(model, batch_tensors["attention_mask"])
    with batch_routing(model, batch_tensors):  # an MoE model's replay (routing_replay.py)
        return _response_logprobs(model, batch_tensors, head, mask, real, temperature, with_entropy)


def _response_logprobs(
    model,  # noqa: ANN001
    batch_tensors: dict[str, torch.Tensor],
    head: torch.nn.Module | None,
    mask: torch.Tensor,
    real: torch.Tensor,
    temperature: float,
    with_entropy: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    width = int(batch_tensors[PROMPT_WIDTH][0])
    input_ids = batch_tensors["input_ids"]
    labels = input_ids[:, width:]
    if head is None:
        logits = response_logits(model, input_ids, mask, batch_tensors["position_ids"], width)
        if temperature != 1.0:
            logits = logits / temperature
        logprobs = logprobs_from_logits(logits, labels).masked_fill(~real, 0.0)
        if not with_entropy:
            return logprobs, None
        return logprobs, entropy_from_logits(logits).masked_fill(~real, 0.0)
    hidden = model.get_decoder()(
        input_ids=input_ids,
        attention_mask=mask,
        position_ids=batch_tensors["position_ids"],
        use_cache=False,
    ).last_hidden_state
    logprobs, entropy = head_logprobs(
        head,
        hidden[:, width - 1 : -1][real],
        labels[real],
        temperature=temperature,
        with_entropy=with_entropy,
    )
    zeros = torch.zeros(labels.shape, dtype=torch.float32, device=labels.device)
    return (
        zeros.masked_scatter(real, logprobs),
        zeros.masked_scatter(real, entropy) if with_entropy else None,
    )
