"""dubito: honest uncertainty for deep networks."""

__version__ = "0.1.0"
