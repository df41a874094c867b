"""A smaller student built from a teacher: the same model with fewer decoder layers.

The kept layers are evenly spaced over the teacher's (first and last included) and copied
with everything else (embeddings, final norm, head), so the student starts as a damaged
copy of the teacher rather than from noise, and shares its tokenizer.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

_LAYER = re.compile(r"\.layers\.(\d+)\.")


def kept_layers(teacher_layers: int, student_layers: int) -> list[int]:
    """Evenly spaced teacher layer indices.

    >>> kept_layers(30, 10)
    [0, 3, 6, 10, 13, 16, 19, 23, 26, 29]
    >>> kept_layers(2, 1)
    [0]
    """
    if not 0 < student_layers < teacher_layers:
        raise ValueError(
            f"a student built from a teacher of {teacher_layers} layers needs 1 to "
            f"{teacher_layers - 1} of them; got {student_layers}"
        )
    if student_layers == 1:
        return [0]
    step = (teacher_layers - 1) / (student_layers - 1)
    return [round(i * step) for i in range(student_layers)]


def default_student_layers(teacher_layers: int) -> int:
    """A third of the teacher's layers, at least one."""
    return max(1, round(teacher_layers / 3))


def build_student(teacher: str | Path, num_layers: int | None, out: Path) -> Path:
    """Write the student as a Hugging Face folder at `out` (atomically; kept if present)."""
    if (out / "config.json").exists():
        return out
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = AutoConfig.from_pretrained(teacher)
    total = config.num_hidden_layers
    keep = kept_layers(total, num_layers or default_student_layers(total))
    teacher_model = AutoModelForCausalLM.from_pretrained(teacher, dtype=torch.float32)
    config.num_hidden_layers = len(keep)
    if getattr(config, "layer_types", None):
        config.layer_types = [config.layer_types[i] for i in keep]
    student = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    source = teacher_model.state_dict()

    def teacher_key(key: str) -> str:
        return _LAYER.sub(lambda m: f".layers.{keep[int(m[1])]}.", key, count=1)

    student.load_state_dict({k: source[teacher_key(k)] for k in student.state_dict()})
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        student.save_pretrained(tmp, safe_serialization=True)
        AutoTokenizer.from_pretrained(teacher).save_pretrained(tmp)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out
