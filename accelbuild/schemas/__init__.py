"""JSON Schemas shipped with accelbuild (pipeline config format, hardware profiles)."""
