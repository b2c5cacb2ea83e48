"""Makes the pack's own package importable in tests the way the Pulumi CLI does: this directory on sys.path.

This folder has no __init__.py on purpose: the pack is a program directory, not a package, and pytest
(rootdir-relative "prepend" import mode) puts the directory of a package-less conftest.py on sys.path.
"""
