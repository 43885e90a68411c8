"""The version of memstrata (one place; the package and its servers report it)."""

__version__ = "0.1.0"

__all__ = ["__version__"]
