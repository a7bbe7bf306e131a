"""The event-driven simulator: events, allocation, ground truth, snapshot, metrics."""
