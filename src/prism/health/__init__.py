"""Liveness and readiness probes: /healthz and /readyz (docs/operations.md)."""
