"""WebShop's purchase reward, as plain functions.

The reward for buying `product` with the chosen `options` when the goal asked for
`goal.attributes`, `goal.options` and a price bound is (Yao et al. 2022, eq. 1)::

    r = r_type * (n_attr_matched + n_option_matched + 1[price <= bound])
               / (len(goal.attributes) + len(goal.options) + 1)

* An attribute matches when some product attribute has `rapidfuzz.fuzz.token_set_ratio`
  > 85 with it, or it occurs verbatim in the title, the bullet points or the description.
* An option matches per goal option: sizes exactly (after folding case and spaces), colours
  after colour normalisation (``"navy blue" == "navy"``, ``"grey" == "gray"``), anything else
  by `token_set_ratio` > 85 (WebShop matches every option fuzzily, but ``"large"`` vs
  ``"x-large"`` scores 100 and ``"x-large"`` vs ``"xx-large"`` 93, hence the exact rule for
  sizes).
* `r_type` (see `type_reward`) compares the purchased product's search query, category path
  and title nouns with the goal product's.

Example:
    >>> from rollcli.envs.webshop.catalog import Goal, Product
    >>> p = Product(asin="B1", title="Acme Lavender Essential Oils Set", category="beauty",
    ...             query="essential oil", product_category="Beauty › Oils",
    ...             attributes=["essential oils", "natural ingredients"], price=12.0,
    ...             options={"size": ["1 fl oz", "2 fl oz"]})
    >>> g = Goal(asin="B1", instruction="i need essential oil with natural ingredients",
    ...          attributes=["essential oil", "natural ingredients"],
    ...          options={"size": "2 fl oz"}, price_upper=20.0, category="beauty",
    ...          query="essential oil", product_category="Beauty › Oils",
    ...          name="Acme Lavender Essential Oils Set")
    >>> r = purchase_reward(p, {"size": "2 fl oz"}, g)
    >>> r.reward, r.r_att, r.r_option, r.r_price, r.r_type
    (1.0, 1.0, 1.0, 1.0, 1.0)
    >>> purchase_reward(p, {"size": "1 fl oz"}, g).reward  # (2 + 0 + 1) / (2 + 1 + 1)
    0.75
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from rapidfuzz import fuzz
from rapidfuzz.utils import default_process

if TYPE_CHECKING:
    from rollcli.envs.webshop.catalog import Goal, Product

FUZZY_THRESHOLD = 85
"""A fuzzy match needs `token_set_ratio` strictly above this."""

_COLOUR_ALIASES = {
    "navy blue": "navy",
    "dark navy": "navy",
    "wine red": "burgundy",
    "wine": "burgundy",
    "bordeaux": "burgundy",
    "off white": "ivory",
    "off-white": "ivory",
    "cream": "ivory",
    "khaki": "beige",
    "tan": "beige",
    "army green": "olive",
    "olive green": "olive",
    "rose gold": "rose gold",
    "fuchsia": "hot pink",
    "sky blue": "light blue",
    "baby blue": "light blue",
    "multicolor": "multi",
    "multicolored": "multi",
    "multi color": "multi",
}
_TITLE_NON_NOUNS = frozenset(
    """a an and the of for with in on to by at from or as is are be it its this that your our
    my you we all new best premium pro plus ultra super extra mini max large small medium big
    long short high low soft hard light dark heavy easy quick fast slow free non natural
    organic pure fresh classic modern vintage cute cool great good perfect deluxe professional
    portable adjustable durable lightweight waterproof comfortable stylish elegant casual
    womens mens women's men's unisex kids girls boys adult black white red blue green yellow
    pink purple gray grey brown beige navy orange silver gold ivory olive multi x xl xxl pcs
    pack set count piece pieces inch inches oz ml ft cm mm lb lbs fl""".split()  # noqa: SIM905 (a word list reads best as text)
)
_TOKEN = re.compile(r"[a-z][a-z']*")


@dataclass(frozen=True)
class RewardBreakdown:
    """The reward and its components; `info` reports `asdict(self)`."""

    reward: float
    r_att: float
    r_option: float | None
    r_price: float
    r_type: float
    n_attr_matched: int
    n_option_matched: int
    query_match: bool
    category_match: bool
    title_score: float

    def as_info(self) -> dict:
        return asdict(self)


def fold(text: str) -> str:
    """Lower-case and collapse whitespace.

    >>> fold("  X-Large   Tall ")
    'x-large tall'
    """
    return " ".join(text.lower().split())


def normalize_color(value: str) -> str:
    """Map a colour name onto a canonical spelling.

    >>> normalize_color("Navy Blue"), normalize_color("grey"), normalize_color("Light Grey")
    ('navy', 'gray', 'light gray')
    """
    words = ["gray" if w == "grey" else w for w in fold(value).replace("colour", "color").split()]
    text = " ".join(words)
    return _COLOUR_ALIASES.get(text, text)


def fuzzy_match(a: str, b: str) -> bool:
    """WebShop's fuzzy rule: `token_set_ratio` > 85 on case-folded, punctuation-free text
    (thefuzz's default processing, which WebShop relied on).

    >>> fuzzy_match("essential oil", "essential oils")  # ratio 96
    True
    >>> fuzzy_match("tea tree", "green tea")
    False
    """
    return fuzz.token_set_ratio(a, b, processor=default_process) > FUZZY_THRESHOLD


def attribute_matches(goal_attributes: Sequence[str], product: Product) -> int:
    """How many goal attributes the product has (fuzzily among its attributes, or verbatim in text).

    >>> from rollcli.envs.webshop.catalog import Product
    >>> p = Product(asin="B", title="Tea Tree Shampoo", attributes=["sulfate free"],
    ...             bullet_points=["Made with natural ingredients"])
    >>> attribute_matches(["sulfate-free", "natural ingredients", "tea tree", "dry hair"], p)
    3
    """
    text_fields = (
        product.title.lower(),
        " ".join(product.bullet_points).lower(),
        product.description.lower(),
    )
    matched = 0
    for goal_attr in goal_attributes:
        if any(fuzzy_match(p_attr, goal_attr) for p_attr in product.attributes) or any(
            goal_attr.lower() in text for text in text_fields
        ):
            matched += 1
    return matched


def option_value_matches(name: str, goal_value: str, chosen_value: str) -> bool:
    """Does one chosen option value satisfy one goal option value?

    >>> option_value_matches("size", "X-Large", "x-large"), option_value_matches("size", "x-large", "xx-large")
    (True, False)
    >>> option_value_matches("color", "navy blue", "Navy"), option_value_matches("color", "grey", "gray")
    (True, True)
    >>> option_value_matches("flavor name", "dark chocolate", "chocolate dark")
    True
    """
    kind = name.lower()
    if "size" in kind:
        return fold(goal_value) == fold(chosen_value)
    if "color" in kind or "colour" in kind:
        return normalize_color(goal_value) == normalize_color(chosen_value)
    return fuzzy_match(fold(goal_value), fold(chosen_value))


def option_matches(goal_options: Mapping[str, str], chosen: Mapping[str, str]) -> int:
    """How many goal options the chosen options satisfy.

    A goal option is compared with the chosen value of the same option name when there is
    one, else with every chosen value (WebShop compares against all of them).

    >>> option_matches({"size": "large", "color": "grey"}, {"size": "large", "color": "gray"})
    2
    >>> option_matches({"size": "large", "color": "grey"}, {"size": "x-large"})
    0
    """
    chosen_folded = {fold(k): v for k, v in chosen.items()}
    matched = 0
    for name, goal_value in goal_options.items():
        key = fold(name)
        candidates: Iterable[str] = (
            [chosen_folded[key]] if key in chosen_folded else chosen_folded.values()
        )
        if any(option_value_matches(name, goal_value, value) for value in candidates):
            matched += 1
    return matched


def title_nouns(title: str) -> set[str]:
    """The title's content words: a spaCy-free stand-in for WebShop's noun filter.

    Lower-cased alphabetic tokens of 3+ letters that are neither stop words nor common
    descriptive adjectives, colours or units.

    >>> sorted(title_nouns("Acme Women's Slim Fit Yoga Pants, High Waist, 2 Pack - Black"))
    ['acme', 'fit', 'pants', 'slim', 'waist', 'yoga']
    """
    tokens = _TOKEN.findall(title.lower())
    return {t for t in tokens if len(t) >= 3 and t not in _TITLE_NON_NOUNS}


def category_path(product_category: str) -> set[str]:
    """Levels of a ``"A › B › C"`` category path, folded.

    >>> sorted(category_path("Beauty & Personal Care › Hair Care › Shampoo"))
    ['beauty & personal care', 'hair care', 'shampoo']
    """
    return {fold(level) for level in re.split(r"›|>", product_category) if level.strip()}


def type_reward(
    bought_query: str,
    bought_category: str,
    bought_title: str,
    goal_query: str,
    goal_category: str,
    goal_title: str,
) -> tuple[float, bool, bool, float]:
    """WebShop's product-type factor, returning `(r_type, query_match, category_match, title_score)`.

    `title_score` = |nouns(bought) ∩ nouns(goal)| / |nouns(goal)| (0.2 when the goal title has
    none); a match is a same search query, ≥ 2 shared category levels, or title_score > 0.2.
    Then r_type = 1 if match else 0.5; overridden to 0.1 if title_score < 0.1 and to 0 if
    title_score == 0.

    >>> type_reward("yoga pants", "", "Acme Yoga Pants", "yoga pants", "", "Zed Yoga Pants")[0]
    1.0
    >>> type_reward("leggings", "A › B", "Acme Yoga Pants Blue", "yoga pants", "C › D",
    ...             "Zed Running Pants Long Tall Athletic Gym Fitness Workout Trousers")
    (0.5, False, False, 0.1111111111111111)
    """
    query_match = fold(bought_query) == fold(goal_query) and bool(goal_query.strip())
    category_match = len(category_path(bought_category) & category_path(goal_category)) >= 2
    goal_nouns = title_nouns(goal_title)
    if goal_nouns:
        title_score = len(title_nouns(bought_title) & goal_nouns) / len(goal_nouns)
    else:
        title_score = 0.2
    r_type = 1.0 if (query_match or category_match or title_score > 0.2) else 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return r_type, query_match, category_match, title_score


def price_ok(price: float, price_upper: float) -> float:
    """1.0 when within budget (inclusive), else 0.0.

    >>> price_ok(39.99, 40.0), price_ok(40.0, 40.0), price_ok(40.01, 40.0)
    (1.0, 1.0, 0.0)
    """
    return 1.0 if price <= price_upper else 0.0


def purchase_reward(
    product: Product, chosen_options: Mapping[str, str], goal: Goal
) -> RewardBreakdown:
    """The full WebShop reward for buying `product` with `chosen_options` under `goal`."""
    r_type, query_match, category_match, title_score = type_reward(
        product.query,
        product.product_category,
        product.title,
        goal.query,
        goal.product_category,
        goal.name,
    )
    n_attr = attribute_matches(goal.attributes, product)
    n_opt = option_matches(goal.options, chosen_options)
    r_price = price_ok(product.price, goal.price_upper)
    total = (n_attr + n_opt + r_price) / (len(goal.attributes) + len(goal.options) + 1)
    return RewardBreakdown(
        reward=total * r_type,
        r_att=n_attr / len(goal.attributes) if goal.attributes else 1.0,
        r_option=n_opt / len(goal.options) if goal.options else None,
        r_price=r_price,
        r_type=r_type,
        n_attr_matched=n_attr,
        n_option_matched=n_opt,
        query_match=query_match,
        category_match=category_match,
        title_score=title_score,
    )
