"""The scripted oracle solves generated goals; random clicking does not."""

from rollcli.envs.webshop.env import WebShopEnv
from rollcli.envs.webshop.oracle import OracleAgent, RandomAgent, evaluate, run_episode


def test_oracle_solves_generated_goals():
    env = WebShopEnv(split="validation")  # the default 1,000-product catalogue, 100 goals
    oracle = evaluate(env, OracleAgent())
    assert oracle["episodes"] == 100
    assert oracle["success_rate"] >= 0.95  # measured 1.00 on all 1,000 goals
    first = evaluate(env, OracleAgent(rank_by_reward=False))
    assert 0.5 <= first["success_rate"] < oracle["success_rate"] + 1e-9  # measured 0.72 overall
    rand = evaluate(env, RandomAgent(seed=0))
    assert rand["success_rate"] <= 0.1 and rand["mean_reward"] < 0.3  # measured 0.02 / 0.17


def test_oracle_episode_reports_components():
    env = WebShopEnv(num_products=200)
    result = run_episode(env, OracleAgent(), goal_index=5)
    info = result["info"]
    assert result["success"] and result["steps"] <= 8
    assert (info["r_att"], info["r_price"], info["r_type"]) == (1.0, 1.0, 1.0)
    assert info["bought_asin"] in env.catalogue.by_asin
