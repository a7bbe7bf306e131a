"""A runtime on Ray: the simulator's schedulers drive a (local or real) Ray cluster.

Layers: :mod:`~crius_gym.runtime.ledger` (the control plane's books, the simulator's code),
:mod:`~crius_gym.runtime.agent` (node agents that emulate training and write checkpoints),
:mod:`~crius_gym.runtime.cluster` (a local multi-node Ray cluster for a scenario, agents pinned
to its nodes) and :mod:`~crius_gym.runtime.driver` (the wall-clock loop). Ray is the optional
``ray`` extra; nothing here imports it at module level.
"""
