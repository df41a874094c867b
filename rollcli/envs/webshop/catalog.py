"""Products, goals and the catalogue that holds them (with deterministic goal splits).

A `Product` carries the fields WebShop's pages and reward read; a `Goal` is one shopping
instruction with what the reward checks (attributes, options, price bound) and the goal
product's query / category / title for the type factor.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

SPLITS = ("train", "validation", "test")


@dataclass
class Product:
    """One product page. `options` maps an option name (``"size"``) to its values."""

    asin: str
    title: str
    price: float = 0.0
    category: str = ""
    query: str = ""
    product_category: str = ""
    attributes: list[str] = field(default_factory=list)
    options: dict[str, list[str]] = field(default_factory=dict)
    bullet_points: list[str] = field(default_factory=list)
    description: str = ""
    reviews: list[str] = field(default_factory=list)
    rating: str = "N.A."

    def search_text(self) -> str:
        """What the search engine indexes: title, category, bullets, description, attributes."""
        parts = [
            self.title,
            self.query,
            self.product_category.replace("›", " "),
            " ".join(self.bullet_points),
            self.description,
            " ".join(self.attributes),
        ]
        return " ".join(parts)


@dataclass
class Goal:
    """A shopping instruction and what the reward checks."""

    asin: str
    instruction: str
    attributes: list[str]
    options: dict[str, str]
    price_upper: float
    category: str = ""
    query: str = ""
    product_category: str = ""
    name: str = ""


@dataclass
class Catalogue:
    """Products (by ASIN, in a fixed order) and goal splits."""

    products: list[Product]
    goals: dict[str, list[Goal]]
    source: str = "generated"

    def __post_init__(self) -> None:
        self.by_asin = {p.asin: p for p in self.products}

    def split(self, name: str) -> list[Goal]:
        if name == "all":
            return [g for s in SPLITS for g in self.goals.get(s, [])]
        if name not in self.goals:
            raise KeyError(
                f"unknown goal split {name!r}; choose one of {', '.join(self.goals)} or 'all'"
            )
        return self.goals[name]


def split_goals(
    goals: Sequence[Goal], seed: int = 233, fractions: tuple[float, float] = (0.1, 0.1)
) -> dict[str, list[Goal]]:
    """Shuffle goals with `seed` and cut them as WebShop does: test first, validation next.

    >>> gs = [Goal(asin=str(i), instruction="", attributes=[], options={}, price_upper=1.0)
    ...       for i in range(20)]
    >>> {k: len(v) for k, v in split_goals(gs).items()}
    {'train': 16, 'validation': 2, 'test': 2}
    """
    order = list(goals)
    random.Random(seed).shuffle(order)
    n_test = int(len(order) * fractions[0])
    n_val = int(len(order) * fractions[1])
    return {
        "train": order[n_test + n_val :],
        "validation": order[n_test : n_test + n_val],
        "test": order[:n_test],
    }
