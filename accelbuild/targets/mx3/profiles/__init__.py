"""Built-in hardware profile files (package data)."""
