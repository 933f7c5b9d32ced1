"""The simulated Jetson: per-layer costs, the discrete-event schedule and the backend."""
