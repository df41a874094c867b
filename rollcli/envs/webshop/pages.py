"""WebShop's pages in text mode: what each page shows and which buttons it has.

A page is rendered the way WebShop's ``observation_mode="text"`` flattens its HTML: the
visible strings joined by ``" [SEP] "``, e.g. ::

    WebShop [SEP] Instruction: [SEP] i need ... [SEP] Search
    Instruction: [SEP] i need ... [SEP] Back to Search [SEP] Page 1 (Total results: 50) [SEP]
        Next > [SEP] B0ABC12345 [SEP] <title> [SEP] $12.99 [SEP] ...
    Instruction: [SEP] i need ... [SEP] Back to Search [SEP] < Prev [SEP] size [SEP] small
        [SEP] large [SEP] <title> [SEP] Price: $12.99 [SEP] Rating: 4.5 [SEP] Description
        [SEP] Features [SEP] Reviews [SEP] Attributes [SEP] Buy Now

Chosen options are shown as ``You have clicked <value>.`` at the end of the item page.
Clickable values are lower-case (WebShop lower-cases actions before matching them).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from rollcli.envs.webshop.catalog import Product

SEP = " [SEP] "
RESULTS_PER_PAGE = 10
SUBPAGES = ("description", "features", "reviews", "attributes")
BACK_TO_SEARCH = "back to search"
NEXT_PAGE = "next >"
PREV_PAGE = "< prev"
BUY_NOW = "buy now"


@dataclass(frozen=True)
class PageState:
    """Where the shopper is. `kind` is "search", "results", "item" or one of `SUBPAGES`."""

    kind: str = "search"
    query: str = ""
    results: tuple[str, ...] = ()
    page: int = 1
    asin: str = ""
    chosen: tuple[tuple[str, str], ...] = field(default=())

    def key(self) -> str:
        """A hashable summary: equal keys mean the same page with the same selections."""
        chosen = ",".join(f"{k}={v}" for k, v in self.chosen)
        return f"{self.kind}|{self.query}|{self.page}|{self.asin}|{chosen}"

    def chosen_options(self) -> dict[str, str]:
        return dict(self.chosen)

    def with_option(self, name: str, value: str) -> PageState:
        chosen = dict(self.chosen)
        chosen[name] = value
        return replace(self, chosen=tuple(sorted(chosen.items())))


def page_results(state: PageState, per_page: int = RESULTS_PER_PAGE) -> tuple[str, ...]:
    start = (state.page - 1) * per_page
    return state.results[start : start + per_page]


def has_next_page(state: PageState, per_page: int = RESULTS_PER_PAGE) -> bool:
    return state.page * per_page < len(state.results)


def option_lookup(product: Product) -> dict[str, tuple[str, str]]:
    """Lower-cased option value -> (option name, value as listed); the first name wins."""
    table: dict[str, tuple[str, str]] = {}
    for name, values in product.options.items():
        for value in values:
            table.setdefault(value.lower(), (name, value))
    return table


def clickables(
    state: PageState, by_asin: dict[str, Product], per_page: int = RESULTS_PER_PAGE
) -> list[str]:
    """The values `click[...]` accepts on this page, in page order."""
    if state.kind == "search":
        return []
    if state.kind == "results":
        out = [BACK_TO_SEARCH]
        if state.page > 1:
            out.append(PREV_PAGE)
        if has_next_page(state, per_page):
            out.append(NEXT_PAGE)
        return out + [asin.lower() for asin in page_results(state, per_page)]
    if state.kind == "item":
        product = by_asin[state.asin]
        return [BACK_TO_SEARCH, PREV_PAGE, *option_lookup(product), *SUBPAGES, BUY_NOW]
    return [BACK_TO_SEARCH, PREV_PAGE]


def _money(price: float) -> str:
    return f"${price:.2f}"


def _subpage_text(kind: str, product: Product) -> list[str]:
    if kind == "description":
        return [product.description or "N.A."]
    if kind == "features":
        return list(product.bullet_points) or ["N.A."]
    if kind == "reviews":
        return list(product.reviews) or ["N.A."]
    return list(product.attributes) or ["N.A."]


def render(
    state: PageState,
    by_asin: dict[str, Product],
    instruction: str,
    per_page: int = RESULTS_PER_PAGE,
) -> str:
    """The page as WebShop's text observation."""
    if state.kind == "search":
        return SEP.join(["WebShop", "Instruction:", instruction, "Search"])
    parts = ["Instruction:", instruction, "Back to Search"]
    if state.kind == "results":
        parts.append(f"Page {state.page} (Total results: {len(state.results)})")
        if state.page > 1:
            parts.append("< Prev")
        if has_next_page(state, per_page):
            parts.append("Next >")
        for asin in page_results(state, per_page):
            product = by_asin[asin]
            parts += [asin, product.title, _money(product.price)]
        return SEP.join(parts)
    product = by_asin[state.asin]
    parts.append("< Prev")
    if state.kind == "item":
        for name, values in product.options.items():
            parts += [name, *values]
        parts += [
            product.title,
            f"Price: {_money(product.price)}",
            f"Rating: {product.rating}",
            "Description",
            "Features",
            "Reviews",
            "Attributes",
            "Buy Now",
        ]
        parts += [f"You have clicked {value}." for _, value in state.chosen]
        return SEP.join(parts)
    return SEP.join(parts + _subpage_text(state.kind, product))
