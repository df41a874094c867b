import os
from pathlib import Path

import pytest

from rollcli.envs.webshop.env import WebShopEnv

REPO = Path(__file__).resolve().parents[2]


def shared_webshop_dir() -> Path:
    root = Path(os.environ.get("ROLL_SHARED_DATA", REPO.parent / "shared" / "data"))
    return root / "webshop"


@pytest.fixture
def small_env():
    return WebShopEnv(num_products=200, catalogue_seed=0, format_penalty=-0.1, max_steps=15)


@pytest.fixture(scope="session")
def real_files():
    folder = shared_webshop_dir()
    products, instructions = folder / "products_100.jsonl", folder / "items_ins_v2_1000.json"
    if not (products.exists() and instructions.exists()):
        pytest.skip(f"WebShop sample data not found under {folder} (set ROLL_SHARED_DATA)")
    return products, instructions
