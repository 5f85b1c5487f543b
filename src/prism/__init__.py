"""Prism: governed tool dispatch for AI agents."""

__version__ = "0.1.0"
API_VERSION = "v1"
