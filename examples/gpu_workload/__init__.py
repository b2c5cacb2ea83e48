"""Example consumer of the gpu-eks output contract (its own Pulumi project: see README.md here)."""
