"""crius_gym: RL research framework for scheduling large-model training on heterogeneous GPUs."""

__version__ = "0.1.0"
