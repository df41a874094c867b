"""A seeded generator of a WebShop-like catalogue: products, then one goal per product.

Products are spread over the ten departments of `vocabulary` (six product types each). A
product draws 3-5 attributes from its department, 0-3 option types with 2-6 values each, a
price in its type's range, and gets a title, bullet points, a description and reviews that
mention its attributes the way Amazon listings do. Each product yields one goal: 1-3 of its
attributes phrased in a human-style instruction, one option combination and a price bound
(`goals.make_goal`). The same `(num_products, seed)` always gives the same catalogue.

Example:
    >>> cat = generate_catalogue(num_products=50, seed=1)
    >>> len(cat.products), sum(len(g) for g in cat.goals.values())
    (50, 50)
    >>> generate_catalogue(num_products=50, seed=1).products[7] == cat.products[7]
    True
"""

from __future__ import annotations

import random

from rollcli.envs.webshop.catalog import Catalogue, Goal, Product, split_goals
from rollcli.envs.webshop.goals import make_goal
from rollcli.envs.webshop.vocabulary import (
    BENEFITS,
    BRAND_HEADS,
    BRAND_TAILS,
    DEPARTMENTS,
    REVIEW_LINES,
    TITLE_LEADS,
    Department,
    ProductType,
)

_INSTRUCTION_TEMPLATES = (
    "i need {article} {attrs} {query}",
    "i am looking for {article} {query} featuring {attrs_and}",
    "find me {attrs} {query}",
    "i want to buy {article} {query} that has {attrs_and}",
    "i'm looking for {attrs} {query}",
    "i would like {article} {query} with {attrs_and}",
)


def _brand(rng: random.Random) -> str:
    return (rng.choice(BRAND_HEADS) + rng.choice(BRAND_TAILS)).capitalize()


def _title_case(text: str) -> str:
    return " ".join(w if w[:1].isdigit() else w[:1].upper() + w[1:] for w in text.split())


_BASE36 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _base36(number: int, width: int) -> str:
    out = ""
    for _ in range(width):
        number, r = divmod(number, 36)
        out = _BASE36[r] + out
    return out


def _asin(index: int, seed: int) -> str:
    """A 10-character Amazon-like id, unique per index (< 36**3) within a catalogue."""
    noise = random.Random(f"asin:{seed}:{index}").randrange(36**5)
    return f"B0{_base36(noise, 5)}{_base36(index, 3)}"


def _title(brand: str, ptype: ProductType, attrs: list[str], rng: random.Random) -> str:
    lead = rng.choice(TITLE_LEADS) + " " if rng.random() < 0.4 else ""
    front = _title_case(attrs[0]) + " " if rng.random() < 0.6 else ""
    tail = f", {_title_case(attrs[1])}" if len(attrs) > 1 and rng.random() < 0.6 else ""
    return f"{brand} {lead}{front}{_title_case(ptype.query)}{tail}"


def _bullets(ptype: ProductType, attrs: list[str], rng: random.Random) -> list[str]:
    out = []
    for attr in attrs:
        out.append(f"{attr.upper()} - this {ptype.query} features {attr}; {rng.choice(BENEFITS)}.")
    out.append(f"WHAT YOU GET: one {ptype.query} and our friendly customer service.")
    return out


def _reviews(ptype: ProductType, rng: random.Random) -> list[str]:
    return [
        f"{rng.choice(REVIEW_LINES).capitalize()}. score: {rng.randint(1, 5)}"
        for _ in range(rng.randint(0, 3))
    ]


def generate_product(index: int, seed: int, rng: random.Random) -> Product:
    """The `index`-th product (department round-robin, everything else from `rng`)."""
    dept: Department = DEPARTMENTS[index % len(DEPARTMENTS)]
    ptype = rng.choice(dept.types)
    brand = _brand(rng)
    attrs = rng.sample(dept.attributes, rng.randint(3, 5))
    n_options = rng.choice((0, 1, 2, 2, 2, 3))
    option_names = sorted(rng.sample(sorted(dept.options), min(n_options, len(dept.options))))
    options = {}
    for name in option_names:
        pool = dept.options[name]
        options[name] = rng.sample(pool, rng.randint(2, min(6, len(pool))))
    lo, hi = ptype.price
    price = round(lo * (hi / lo) ** rng.random(), 0) - 0.01
    title = _title(brand, ptype, attrs, rng)
    description = (
        f"The {brand} {ptype.query} features {attrs[0]} and {attrs[1]}. "
        f"{rng.choice(BENEFITS).capitalize()}. Sold by {brand}."
    )
    return Product(
        asin=_asin(index, seed),
        title=title,
        price=max(price, 0.99),
        category=dept.name,
        query=ptype.query,
        product_category=f"{dept.path} › {ptype.subpath}",
        attributes=attrs,
        options=options,
        bullet_points=_bullets(ptype, attrs, rng),
        description=description,
        reviews=_reviews(ptype, rng),
        rating=f"{rng.uniform(3.0, 5.0):.1f}" if rng.random() < 0.7 else "N.A.",
    )


def instruction_for(product: Product, attributes: list[str], rng: random.Random) -> str:
    """A human-style instruction naming the product type and the goal attributes."""
    template = rng.choice(_INSTRUCTION_TEMPLATES)
    article = "an" if product.query[:1] in "aeiou" else "a"
    if product.query.endswith("s") and not product.query.endswith("ss"):
        article = "some"
    attrs_and = (
        " and ".join(attributes)
        if len(attributes) <= 2
        else (", ".join(attributes[:-1]) + " and " + attributes[-1])
    )
    return template.format(
        article=article,
        attrs=", ".join(attributes),
        attrs_and=attrs_and,
        query=product.query,
    )


def generate_goal(product: Product, rng: random.Random) -> Goal:
    attributes = rng.sample(product.attributes, rng.randint(1, min(3, len(product.attributes))))
    style = "synthetic" if rng.random() < 0.5 else "human"
    return make_goal(product, instruction_for(product, attributes, rng), attributes, rng, style)


def generate_catalogue(num_products: int = 1000, seed: int = 0) -> Catalogue:
    """A deterministic catalogue of `num_products` products with one goal each."""
    if num_products < 1:
        raise ValueError(f"num_products must be at least 1, got {num_products}")
    rng = random.Random(f"webshop-catalogue:{seed}")
    products = [generate_product(i, seed, rng) for i in range(num_products)]
    goal_rng = random.Random(f"webshop-goals:{seed}")
    goals = [generate_goal(p, goal_rng) for p in products]
    return Catalogue(
        products=products,
        goals=split_goals(goals, seed=seed + 233),
        source=f"generated:{num_products}:{seed}",
    )
