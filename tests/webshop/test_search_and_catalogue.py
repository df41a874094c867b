"""Search determinism and the generated catalogue."""

from collections import Counter

from rollcli.envs.webshop.catalog import Product
from rollcli.envs.webshop.generator import generate_catalogue
from rollcli.envs.webshop.search import SearchEngine


def test_search_is_deterministic_and_breaks_ties_by_catalogue_order():
    products = [Product(asin=f"A{i}", title="Red Running Shoes") for i in range(30)]
    products.insert(5, Product(asin="BEST", title="Red Running Shoes Red Running"))
    engine = SearchEngine(products)
    first = engine.search("red running shoes", k=50)
    assert first[0] == "BEST"
    assert first[1:] == [f"A{i}" for i in range(30)]  # identical scores keep catalogue order
    assert SearchEngine(products).search("red running shoes", k=50) == first
    assert engine.search("red running shoes", k=3) == first[:3]


def test_search_plurals_and_unknown_words():
    engine = SearchEngine([Product("A", "Essential Oil"), Product("B", "Olive Oils")])
    assert engine.search("essential oils") == ["A", "B"]
    assert engine.search("qwerty zzz") == []


def test_generated_catalogue_is_deterministic_and_realistic():
    a = generate_catalogue(num_products=1000, seed=0)
    b = generate_catalogue(num_products=1000, seed=0)
    assert [p.title for p in a.products] == [p.title for p in b.products]
    assert [g.instruction for g in a.split("train")] == [g.instruction for g in b.split("train")]
    assert generate_catalogue(num_products=1000, seed=1).products[0].title != a.products[0].title

    assert len({p.asin for p in a.products}) == 1000
    assert len(Counter(p.category for p in a.products)) == 10
    assert len({p.query for p in a.products}) >= 50
    assert sum(bool(p.options) for p in a.products) > 700
    for p in a.products[:50]:
        assert 3 <= len(p.attributes) <= 5 and p.price > 0 and p.bullet_points and p.description


def test_goals_are_consistent_with_their_product():
    cat = generate_catalogue(num_products=300, seed=2)
    splits = {name: {g.asin for g in cat.split(name)} for name in ("train", "validation", "test")}
    assert sum(len(s) for s in splits.values()) == 300
    assert not (splits["train"] & splits["validation"]) and not (splits["train"] & splits["test"])
    assert len(splits["validation"]) == len(splits["test"]) == 30
    for goal in cat.split("all"):
        product = cat.by_asin[goal.asin]
        assert set(goal.attributes) <= set(product.attributes)
        assert all(goal.options[n] in product.options[n] for n in goal.options)
        assert product.price <= goal.price_upper
        assert f"price lower than {goal.price_upper:.2f} dollars" in goal.instruction
        assert product.query in goal.instruction and goal.name == product.title
