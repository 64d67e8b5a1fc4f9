"""Pipeline configs: YAML with positions, schema validation, typed spec."""
