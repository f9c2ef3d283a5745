"""Read-only commands for a running cluster: `gpu2dra doctor`, `explain`, `report`, `impact`,
`quota` and `deviceclasses`. What they share to read the cluster: app/readers/."""
