"""crius_gym: RL research framework for scheduling large-model training on heterogeneous GPUs.

Importing the package registers every scenario as a Gymnasium id (``crius_gym/Hetero64-v4``
…); nothing heavy is imported until an env is made.
"""

from crius_gym.registration import register_scenarios as _register

__version__ = "0.1.0"

REGISTERED_IDS = _register()
