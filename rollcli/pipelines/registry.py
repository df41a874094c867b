"""Which class runs each recipe `pipeline:` value. Imports are lazy: the CLI stays light."""

from __future__ import annotations

import importlib

from rollcli.pipelines.protocol import Pipeline

# pipeline name -> "module:Class"
PIPELINES = {
    "rlvr": "rollcli.pipelines.rl.pipeline:RLPipeline",
    "sft": "rollcli.pipelines.sft:SFTPipeline",
    "dpo": "rollcli.pipelines.dpo:DPOPipeline",
    "distill": "rollcli.pipelines.distill:DistillPipeline",
    "agentic": "rollcli.pipelines.rl.pipeline:RLPipeline",
}


def pipeline_class(name: str) -> type[Pipeline]:
    module, cls = PIPELINES[name].split(":")
    return getattr(importlib.import_module(module), cls)
