"""Test utilities shared by the test packages (offline API-server checks and the like)."""
