"""WebShop reward: hand-worked cases for every component and every type-factor branch."""

import pytest

from rollcli.envs.webshop.catalog import Goal, Product
from rollcli.envs.webshop.reward import (
    attribute_matches,
    fuzzy_match,
    normalize_color,
    option_matches,
    price_ok,
    purchase_reward,
    title_nouns,
    type_reward,
)

GOAL_TITLE = "Acme Yoga Pants Leggings Trousers Tights Bottoms Activewear Gym Workout Fitness"


def test_title_nouns_of_goal_title():
    assert len(title_nouns(GOAL_TITLE)) == 11


def test_fuzzy_singular_plural_matches():
    # token_set_ratio("essential oil", "essential oils") = 2*13/27 = 96.3 > 85
    assert fuzzy_match("essential oil", "essential oils")
    assert not fuzzy_match("essential oil", "olive oil")
    assert fuzzy_match("Sulfate-Free", "sulfate free")  # case and punctuation are folded


def test_attribute_matches_by_fuzzy_and_by_text():
    product = Product(
        asin="B1",
        title="Lavender Essential Oils",
        attributes=["essential oils"],
        bullet_points=["Cold pressed, with natural ingredients"],
        description="Great for dry skin.",
    )
    # "essential oil" fuzzy-matches an attribute; "natural ingredients" is in a bullet point,
    # "dry skin" in the description; "paraben free" is nowhere.
    goal = ["essential oil", "natural ingredients", "dry skin", "paraben free"]
    assert attribute_matches(goal, product) == 3


def test_size_is_exact_after_folding():
    assert option_matches({"size": "X-Large"}, {"size": " x-large "}) == 1
    # fuzzily "x-large" vs "xx-large" scores 93 and "large" vs "x-large" 100; sizes are exact
    assert fuzzy_match("x-large", "xx-large") and fuzzy_match("large", "x-large")
    assert option_matches({"size": "large"}, {"size": "x-large"}) == 0
    assert option_matches({"size": "x-large"}, {"size": "xx-large"}) == 0
    assert option_matches({"size": "8.5"}, {"size": "8"}) == 0


def test_colour_normalisation():
    assert normalize_color("Navy Blue") == normalize_color("navy") == "navy"
    assert normalize_color("Light Grey") == "light gray"
    assert option_matches({"color": "grey"}, {"color": "Gray"}) == 1
    assert option_matches({"color": "navy blue"}, {"color": "navy"}) == 1
    assert option_matches({"color": "light blue"}, {"color": "blue"}) == 0


def test_other_options_are_fuzzy_and_any_name_is_tried():
    assert option_matches({"flavor name": "peanut butter"}, {"flavor name": "Peanut Butter"}) == 1
    # no option of that name chosen: compare with every chosen value, as WebShop does
    assert option_matches({"scent": "lavender"}, {"style": "lavender"}) == 1
    assert option_matches({"scent": "lavender"}, {}) == 0


def test_price_within_and_over_budget():
    assert price_ok(40.0, 40.0) == 1.0
    assert price_ok(40.01, 40.0) == 0.0


@pytest.mark.parametrize(
    ("bought_query", "bought_category", "bought_title", "expected"),
    [
        # same query, title nouns {yoga, pants, leggings} -> 3/11 = 0.27: match -> 1.0
        ("yoga pants", "X › Y", "Zed Yoga Pants Leggings", (1.0, True, False, 3 / 11)),
        # query differs, category shares 2 levels (Women, Clothing), 2/11 = 0.18 -> 1.0
        ("leggings", "Women › Clothing › Active", "Zed Yoga Pants", (1.0, False, True, 2 / 11)),
        # nothing shared but title 3/11 = 0.27 > 0.2 -> 1.0
        ("leggings", "X › Y", "Zed Yoga Pants Leggings", (1.0, False, False, 3 / 11)),
        # no query/category match and 0.1 <= 2/11 = 0.18 <= 0.2 -> 0.5
        ("leggings", "X › Y", "Zed Yoga Pants", (0.5, False, False, 2 / 11)),
        # same query but 1/11 = 0.09 < 0.1 -> 0.1 regardless of the match
        ("yoga pants", "X › Y", "Zed Yoga Mat", (0.1, True, False, 1 / 11)),
        # no shared title noun -> 0.0
        ("yoga pants", "Women › Clothing", "Zed Coffee Mug", (0.0, True, True, 0.0)),
    ],
)
def test_type_reward_branches(bought_query, bought_category, bought_title, expected):
    got = type_reward(
        bought_query,
        bought_category,
        bought_title,
        "yoga pants",
        "Women › Clothing › Leggings",
        GOAL_TITLE,
    )
    assert got[:3] == expected[:3]
    assert got[3] == pytest.approx(expected[3])


def test_type_reward_goal_without_nouns_scores_title_point_two():
    # no goal nouns -> title_score 0.2, which is not > 0.2: only query/category can match
    assert type_reward("a", "", "Anything", "b", "", "Black Large") == (0.5, False, False, 0.2)
    assert type_reward("b", "", "Anything", "b", "", "Black Large")[0] == 1.0


def _goal(**kw):
    base = dict(
        asin="G",
        instruction="i need yoga pants",
        attributes=["high waist", "tummy control"],
        options={"color": "navy blue", "size": "large"},
        price_upper=40.0,
        query="yoga pants",
        product_category="Women › Clothing › Leggings",
        name=GOAL_TITLE,
    )
    base.update(kw)
    return Goal(**base)


def test_purchase_reward_full_marks():
    product = Product(
        asin="P",
        title="Zed High Waist Yoga Pants",
        price=29.99,
        query="yoga pants",
        product_category="Women › Clothing › Leggings",
        attributes=["high waist", "tummy control"],
    )
    r = purchase_reward(product, {"color": "navy", "size": "large"}, _goal())
    assert (r.reward, r.r_att, r.r_option, r.r_price, r.r_type) == (1.0, 1.0, 1.0, 1.0, 1.0)


def test_purchase_reward_partial_arithmetic():
    product = Product(
        asin="P",
        title="Zed Yoga Pants",  # 2/11 title nouns, other query and category -> r_type 0.5
        price=45.0,  # over the 40.00 bound -> r_price 0
        query="leggings",
        product_category="Sports › Running",
        attributes=["high waist"],  # 1 of 2 attributes
    )
    r = purchase_reward(product, {"color": "navy", "size": "x-large"}, _goal())
    # (1 attr + 1 option + 0 price) / (2 + 2 + 1) = 0.4, times r_type 0.5 = 0.2
    assert r.reward == pytest.approx(0.2)
    assert (r.r_att, r.r_option, r.r_price, r.r_type) == (0.5, 0.5, 0.0, 0.5)


def test_purchase_reward_without_goal_options():
    product = Product(asin="P", title="Zed Yoga Pants Leggings", price=10.0, attributes=[])
    r = purchase_reward(product, {}, _goal(options={}, attributes=["organic"]))
    # (0 + 0 + 1) / (1 + 0 + 1) = 0.5; title 3/11 > 0.2 -> r_type 1
    assert r.reward == 0.5 and r.r_option is None
