"""The one request stack every route passes through (prism.edge.stack), the per-request context it builds
(prism.edge.context), and each door's error shape and route entrance (prism.edge.doors). docs/architecture.md
draws it."""
