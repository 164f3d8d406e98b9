"""CLI commands of each migration; each module defines ``register(app)``."""
