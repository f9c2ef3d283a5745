"""Commands for a running cluster: `gpu2dra doctor`, `explain`, `report`, `impact`, `quota`,
`deviceclasses` and `prune-templates`. What they share to read the cluster: app/readers/."""
