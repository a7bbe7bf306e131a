"""The cluster as a picture (``render_mode="rgb_array"``).

A ``FRAME_SHAPE`` (height, width, RGB) uint8 frame: one horizontal band per GPU type (in the
cluster's group order, at most ``max_gpu_types``), each node a column of ``gpus_per_node`` cells
(busy GPUs dark blue, free ones light grey; nodes narrower than a pixel are averaged into a
shade), and at the bottom the waiting queue as an orange bar (full width = ``QUEUE_FULL`` jobs;
red when longer) beside the running jobs in green. Drawn with NumPy only (about 0.1 s
for the 1,280-GPU cluster on one core).
"""

from __future__ import annotations

import numpy as np

from crius_gym.hardware.cluster import ClusterSpec

FRAME_SHAPE = (256, 512, 3)
QUEUE_FULL = 100
_BUSY = np.array([31, 78, 140], dtype=np.float64)
_FREE = np.array([225, 225, 225], dtype=np.float64)
_BG = np.array([255, 255, 255], dtype=np.uint8)
_QUEUE = np.array([230, 140, 30], dtype=np.uint8)
_OVER = np.array([200, 30, 30], dtype=np.uint8)
_RUN = np.array([60, 160, 80], dtype=np.uint8)


def render_cluster(
    cluster: ClusterSpec, free_per_node: dict[str, np.ndarray], waiting: int, running: int
) -> np.ndarray:
    """Draw one frame.

    Args:
        cluster: the cluster (groups give the bands).
        free_per_node: free GPUs per node of each GPU type.
        waiting: jobs waiting.
        running: jobs holding GPUs.

    Returns:
        A ``FRAME_SHAPE`` uint8 array.
    """
    h, w, _ = FRAME_SHAPE
    frame = np.empty(FRAME_SHAPE, dtype=np.uint8)
    frame[:] = _BG
    queue_h = 24
    bands = cluster.groups
    band_h = (h - queue_h - 4) // max(1, len(bands))
    for b, group in enumerate(bands):
        top = b * band_h + 2
        free = np.asarray(free_per_node[group.gpu_type], dtype=np.float64)
        cap = group.gpus_per_node
        # Busy share of each (node, GPU slot): slot k of a node is busy when k >= free.
        slots = np.arange(cap)[None, :] >= free[:, None]  # nodes x slots
        cols = np.linspace(0, len(free), w + 1).astype(int)
        rows = np.linspace(0, cap, band_h - 3).astype(int)
        for x in range(w):
            lo, hi = cols[x], max(cols[x + 1], cols[x] + 1)
            busy = slots[lo:hi].mean(axis=0)  # per slot, over the nodes in this pixel column
            per_row = busy[np.minimum(rows[:-1], cap - 1)]
            colour = _FREE[None, :] * (1 - per_row[:, None]) + _BUSY[None, :] * per_row[:, None]
            frame[top : top + len(per_row), x] = colour.astype(np.uint8)
    base = h - queue_h
    q = min(1.0, waiting / QUEUE_FULL)
    frame[base + 2 : base + 11, : int(q * w)] = _OVER if waiting > QUEUE_FULL else _QUEUE
    r = min(1.0, running / QUEUE_FULL)
    frame[base + 13 : base + 22, : int(r * w)] = _RUN
    return frame
