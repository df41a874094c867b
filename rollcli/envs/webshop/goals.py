"""Turn a product and its instruction into a `Goal`, the way WebShop synthesises goals.

WebShop appends the chosen options and a price bound to a product's instruction:
``"<instruction> with color: navy, and size: large, and price lower than 40.00 dollars"``.
The bound is the larger of two distinct multiples of 10 drawn from the first four that exceed
the product's price (so the goal product always fits); with fewer than two (price ≥ 980) the
goal has no bound. WebShop enumerates every option combination as a separate goal; here one
combination per product is drawn with the seeded `rng` (the catalogue stays one goal per
product).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from rollcli.envs.webshop.catalog import Goal, Product

PRICE_STEPS = [10.0 * i for i in range(1, 100)]
NO_PRICE_BOUND = 1_000_000.0


def price_bound(price: float, rng: random.Random) -> float:
    """A price bound above `price`, WebShop style (`NO_PRICE_BOUND` when none fits).

    >>> b = price_bound(23.5, random.Random(0)); b in (40.0, 50.0, 60.0)
    True
    >>> price_bound(995.0, random.Random(0))
    1000000.0
    """
    above = [p for p in PRICE_STEPS if p > price][:4]
    if len(above) < 2:
        return NO_PRICE_BOUND
    return max(rng.sample(above, 2))


def option_clause(options: Mapping[str, str], style: str = "synthetic") -> str:
    """The option part of an instruction.

    >>> option_clause({"color": "navy", "size": "large"})
    ' with color: navy, and size: large'
    >>> option_clause({"color": "navy", "size": "large"}, style="human")
    ' in navy color and in size large'
    >>> option_clause({})
    ''
    """
    if not options:
        return ""
    if style == "synthetic":
        return " with " + ", and ".join(f"{k}: {v}" for k, v in options.items())
    parts = []
    for name, value in options.items():
        if "color" in name:
            parts.append(f"in {value} color")
        elif "size" in name:
            parts.append(f"in size {value}")
        else:
            parts.append(f"with {name} {value}")
    return " " + " and ".join(parts)


def price_clause(price_upper: float) -> str:
    """
    >>> price_clause(40.0)
    ', and price lower than 40.00 dollars'
    >>> price_clause(NO_PRICE_BOUND)
    ''
    """
    if price_upper >= NO_PRICE_BOUND:
        return ""
    return f", and price lower than {price_upper:.2f} dollars"


def choose_options(product: Product, rng: random.Random) -> dict[str, str]:
    """One value for every option of the product (names in sorted order, as WebShop)."""
    return {
        name: rng.choice(product.options[name])
        for name in sorted(product.options)
        if product.options[name]
    }


def make_goal(
    product: Product,
    instruction: str,
    attributes: Sequence[str],
    rng: random.Random,
    style: str = "synthetic",
) -> Goal:
    """A goal for `product`: its instruction plus one option combination and a price bound."""
    options = choose_options(product, rng)
    upper = price_bound(product.price, rng)
    text = f"{instruction.rstrip(' .')}{option_clause(options, style)}{price_clause(upper)}"
    return Goal(
        asin=product.asin,
        instruction=text,
        attributes=list(attributes),
        options=options,
        price_upper=upper,
        category=product.category,
        query=product.query,
        product_category=product.product_category,
        name=product.title,
    )
