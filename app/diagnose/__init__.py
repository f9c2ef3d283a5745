"""Read-only commands that say why the cluster, a pod or a namespace is as it is: `doctor/`
(the DRA readiness checklist), `explain/` (one pod, step by step), `report/` (the workloads
still on legacy GPU resources, and a rollout order)."""
