"""Commands that change the cluster: a dry run unless told to apply, each write guarded by
preconditions. `prune/`: `gpu2dra prune-templates`."""
