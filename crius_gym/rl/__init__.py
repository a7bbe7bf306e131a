"""RL: MaskablePPO factory, policy networks, callbacks, imitation warm start, policy adapters."""
