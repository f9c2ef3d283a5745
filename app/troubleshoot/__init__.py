"""Read-only commands for a running cluster: `gpu2dra doctor`, `explain` and `report`, with the
client they read through and a CEL evaluator for DeviceClass and request selectors."""
