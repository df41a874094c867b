"""WebShop's own files (the shared 100-product sample), when present."""

import pytest

from rollcli.envs.webshop.env import WebShopEnv
from rollcli.envs.webshop.loader import load_webshop, read_instructions, read_products
from rollcli.envs.webshop.oracle import OracleAgent, RandomAgent, evaluate


def test_fields_are_parsed(real_files):
    products_path, instructions_path = real_files
    products = read_products(products_path)
    assert len(products) == 100
    by_asin = {p.asin: p for p in products}
    table = by_asin["B06Y3VLDFB"]
    assert table.title.startswith("Vhomes Lights Reclaimed Wood Console Table")
    assert table.price == pytest.approx(877.8) and table.category == "garden"
    assert table.query == "console tables"
    assert table.product_category.endswith("Sofa & Console Tables")
    assert table.attributes == ["console table", "solid wood"]
    assert table.bullet_points[1].startswith("Material:SOLID WOOD")
    with_options = by_asin["B08ZRR3DZT"]
    assert (
        with_options.options["size"][0] == "x-small"
        and "light blue" in with_options.options["color"]
    )
    assert 19.99 <= with_options.price <= 27.99  # a range is drawn from, deterministically
    assert read_products(products_path)[1].price == products[1].price
    ins = read_instructions(instructions_path)
    assert len(ins) == 1000 and ins["B07DJJXGB5"]["instruction_attributes"] == [
        "tea tree",
        "natural ingredients",
    ]


def test_goals_from_instructions(real_files):
    catalogue = load_webshop(*real_files)
    goals = catalogue.split("all")
    assert len(goals) == 44
    for goal in goals:
        product = catalogue.by_asin[goal.asin]
        assert goal.attributes and goal.name == product.title
        assert all(goal.options[n] in product.options[n] for n in goal.options)
        assert product.price <= goal.price_upper


def test_oracle_plays_the_44_instructed_products(real_files):
    products_path, instructions_path = real_files
    env = WebShopEnv(products_path=products_path, instructions_path=instructions_path, split="all")
    oracle = evaluate(env, OracleAgent())
    assert oracle["episodes"] == 44 and oracle["success_rate"] >= 0.95  # measured 44/44
    assert evaluate(env, RandomAgent(seed=0))["success_rate"] < 0.2  # measured 3/44
