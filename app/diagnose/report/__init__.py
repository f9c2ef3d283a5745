"""`gpu2dra report`: every workload that still asks for legacy GPU resources, by namespace.

A workload is the controller at the top (Deployment, StatefulSet, DaemonSet, Job, CronJob, a
custom resource with pod templates) or a bare Pod. For each: the GPUs its pods ask for, the
templates translation would create and every warning it would give; then a rollout order.
`gather` reads the cluster (GETs only); `build` (report.py) is pure; `render` prints it;
`command` runs the three.
"""
