"""WebShop (Yao et al. 2022) in pure Python: text-mode pages, BM25 search, WebShop's reward.

The default catalogue is generated (`generate_catalogue`); WebShop's own files load with
`load_webshop` or ``WebShopEnv(products_path=..., instructions_path=...)``. Importing this
package registers the ``"webshop"`` environment.
"""

from rollcli.envs.webshop.catalog import Catalogue, Goal, Product
from rollcli.envs.webshop.env import INSTRUCTIONS, WebShopEnv
from rollcli.envs.webshop.generator import generate_catalogue
from rollcli.envs.webshop.loader import load_webshop
from rollcli.envs.webshop.oracle import OracleAgent, RandomAgent, evaluate, run_episode
from rollcli.envs.webshop.reward import RewardBreakdown, purchase_reward
from rollcli.envs.webshop.search import SearchEngine

__all__ = [
    "INSTRUCTIONS",
    "Catalogue",
    "Goal",
    "OracleAgent",
    "Product",
    "RandomAgent",
    "RewardBreakdown",
    "SearchEngine",
    "WebShopEnv",
    "evaluate",
    "generate_catalogue",
    "load_webshop",
    "purchase_reward",
    "run_episode",
]
