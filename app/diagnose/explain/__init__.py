"""`gpu2dra explain pod NAME -n NS`: why a GPU pod is in its state, step by step.

`gather` reads the pod and what it depends on (GETs only); `explain` is a pure function of it:
translated or not (and why), template, ResourceClaim, allocation (device by device, with the
selectors evaluated as the scheduler does), scheduling, and the events as evidence; `render`
prints it; `command` runs the three.
"""
