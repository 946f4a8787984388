"""A training run: settings, device, optimizer, checkpoints, what happens after each step, metrics."""
