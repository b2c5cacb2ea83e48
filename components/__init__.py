"""The stack's component resources, a module each, and the pure builders of what they declare."""

MANAGED_BY = {"app.kubernetes.io/managed-by": "gpu-eks"}
"""The label on every Kubernetes object gpu-eks declares itself (not on what Helm charts create)."""
