"""Package discovery for roll.

`envs/`, `rewards/` and `recipes/` live at the top of the repository but ship inside the
installed package as `rollcli.envs`, `rollcli.rewards` and `rollcli.recipes`, so no
top-level import name collides with PyPI packages. Everything else is in pyproject.toml.
"""

from setuptools import find_namespace_packages, setup

MAPPED = {
    "rollcli": "rollcli",
    "rollcli.envs": "envs",
    "rollcli.rewards": "rewards",
    "rollcli.recipes": "recipes",
}


def _packages() -> list[str]:
    found = []
    for name, folder in MAPPED.items():
        found.append(name)
        found += [
            f"{name}.{sub}" for sub in find_namespace_packages(folder, exclude=["*__pycache__*"])
        ]
    return found


setup(packages=_packages(), package_dir=MAPPED)
