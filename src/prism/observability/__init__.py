"""What Prism tells its operators about itself: Prometheus metrics, structured logs, request ids
(docs/operations.md)."""
