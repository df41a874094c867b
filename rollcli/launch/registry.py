"""Which class runs each recipe `pipeline:` value (`PipelineSpec.runner`). Imports are lazy:
the CLI stays light."""

from __future__ import annotations

import importlib

from rollcli.config.pipeline_spec import spec_of
from rollcli.pipelines.protocol import Pipeline


def pipeline_class(name: str) -> type[Pipeline]:
    module, cls = spec_of(name).runner.split(":")
    return getattr(importlib.import_module(module), cls)


def pipeline_module(name: str) -> str:
    """The module that holds `pipeline_class(name)`, not imported."""
    return spec_of(name).runner.split(":")[0]
