"""Load a catalogue from WebShop's own files.

* The search-engine product documents (``resources_*/documents.jsonl`` style, one JSON object
  per line: ``{"id", "contents", "product": {...}}``) or WebShop's plain product list
  (``items_shuffle*.json``, a JSON list of the same ``product`` objects).
* The attribute / instruction file ``items_ins_v2*.json``, keyed by ASIN:
  ``{"attributes": [...], "instruction": "...", "instruction_attributes": [...]}``.

Products get WebShop's price rule: a single listed price is the price; a range ``[lo, hi]``
becomes a seeded uniform draw in it; no price becomes 100.0. Every product with an
instruction yields one goal (see `goals.make_goal`).
"""

from __future__ import annotations

import json
import random
import zlib
from pathlib import Path
from typing import Any

from rollcli.envs.webshop.catalog import Catalogue, Goal, Product, split_goals
from rollcli.envs.webshop.goals import make_goal

DEFAULT_PRICE = 100.0


def _price(pricing: Any, asin: str, seed: int) -> float:
    values = [float(p) for p in pricing] if isinstance(pricing, list) else []
    if not values:
        return DEFAULT_PRICE
    if len(values) == 1:
        return values[0]
    rng = random.Random(zlib.crc32(f"{seed}:{asin}".encode()))
    return round(rng.uniform(min(values[:2]), max(values[:2])), 2)


def _strings(value: Any) -> list[str]:
    if not value:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v).strip() for v in value if str(v).strip()]


def _reviews(value: Any) -> list[str]:
    out = []
    for review in value or []:
        if isinstance(review, dict):
            title, body = review.get("title", ""), review.get("body", "")
            score = review.get("score", "")
            out.append(
                " ".join(str(x) for x in (title, body, f"score: {score}" if score else "") if x)
            )
        else:
            out.append(str(review))
    return out


def product_from_record(record: dict[str, Any], seed: int = 0) -> Product:
    """Build a `Product` from a WebShop product object (or a search document wrapping one)."""
    raw = record.get("product", record)
    asin = str(raw.get("asin") or record.get("id"))
    options = {
        str(name).lower(): [str(v) for v in values]
        for name, values in (raw.get("options") or {}).items()
        if values
    }
    return Product(
        asin=asin.upper(),
        title=str(raw.get("Title") or raw.get("name") or ""),
        price=_price(raw.get("pricing"), asin, seed),
        category=str(raw.get("category") or ""),
        query=str(raw.get("query") or ""),
        product_category=str(raw.get("product_category") or ""),
        attributes=_strings(raw.get("Attributes")),
        options=options,
        bullet_points=_strings(raw.get("BulletPoints") or raw.get("small_description")),
        description=str(raw.get("Description") or raw.get("full_description") or ""),
        reviews=_reviews(raw.get("Reviews")),
        rating=str(raw.get("Rating") or "N.A."),
    )


def read_products(path: str | Path, seed: int = 0) -> list[Product]:
    """Read products from a ``.jsonl`` of search documents or a ``.json`` product list."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        records = [json.loads(line) for line in text.splitlines() if line.strip()]
    else:
        records = json.loads(text)
    seen: set[str] = set()
    products = []
    for record in records:
        product = product_from_record(record, seed)
        if product.asin not in seen:
            seen.add(product.asin)
            products.append(product)
    return products


def read_instructions(path: str | Path) -> dict[str, dict[str, Any]]:
    """Read ``items_ins_v2*.json``: ASIN (upper-cased) -> attributes / instruction record."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return {asin.upper(): record for asin, record in data.items()}


def goals_for(
    products: list[Product], instructions: dict[str, dict[str, Any]], seed: int = 0
) -> list[Goal]:
    """One goal per product that has an instruction and instruction attributes."""
    goals = []
    for product in products:
        record = instructions.get(product.asin, {})
        text, attrs = record.get("instruction"), record.get("instruction_attributes")
        if not text or not attrs:
            continue
        rng = random.Random(zlib.crc32(f"goal:{seed}:{product.asin}".encode()))
        goals.append(make_goal(product, text, attrs, rng, style="synthetic"))
    return goals


def load_webshop(
    products_path: str | Path,
    instructions_path: str | Path | None = None,
    seed: int = 0,
) -> Catalogue:
    """A `Catalogue` from WebShop's files; attributes missing on a product come from the
    instruction file (WebShop fills `Attributes` from ``items_ins_v2`` the same way)."""
    products = read_products(products_path, seed)
    instructions = read_instructions(instructions_path) if instructions_path else {}
    for product in products:
        extra = instructions.get(product.asin, {}).get("attributes") or []
        if not product.attributes and extra:
            product.attributes = list(extra)
    goals = goals_for(products, instructions, seed)
    return Catalogue(
        products=products, goals=split_goals(goals, seed=233), source=str(products_path)
    )
