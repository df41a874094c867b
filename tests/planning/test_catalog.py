import subprocess
import sys

import pytest

from rollcli.models.catalog import CATALOG, PUBLISHED_PARAMS
from rollcli.models.registry import MODELS, get_model_spec, param_count


@pytest.mark.parametrize("spec", CATALOG, ids=lambda s: s.name)
def test_param_count_matches_model_card(spec):
    published = PUBLISHED_PARAMS[spec.name]
    assert param_count(spec) == pytest.approx(published, rel=0.03)


def test_every_entry_is_registered_and_consistent():
    assert {s.name for s in CATALOG} == set(PUBLISHED_PARAMS)
    for spec in CATALOG:
        assert MODELS[spec.name] is spec
        assert spec.num_attention_heads % spec.num_kv_heads == 0
        assert bool(spec.num_experts) == (spec.architecture == "qwen3_moe")


def test_moe_counts_all_experts():
    moe = get_model_spec("qwen3-30b-a3b")
    # 128 experts × 3 projections × 2048 × 768 per layer, 48 layers: the experts alone.
    experts = 48 * 128 * 3 * 2048 * 768
    assert param_count(moe) > experts
    assert experts == 28_991_029_248


def test_catalog_can_be_imported_before_the_registry():
    code = (
        "import rollcli.models.catalog as c; from rollcli.models.registry import MODELS; "
        "assert all(MODELS[s.name] is s for s in c.CATALOG)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_docstring_examples():
    import doctest

    from rollcli.planning import devices, memory

    for module in (devices, memory):
        assert doctest.testmod(module).failed == 0
