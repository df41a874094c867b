"""Text environments (gymnasium `reset/step` on strings).

Environments register themselves by name in `rollcli.envs.registry`; `make(name, **kwargs)`
builds one. Importing this package imports every built-in environment module so that the
registry is complete.
"""

from rollcli.envs.registry import ENV_REGISTRY, EnvSpec, make, register_env

__all__ = ["ENV_REGISTRY", "EnvSpec", "make", "register_env"]
