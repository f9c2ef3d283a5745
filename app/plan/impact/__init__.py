"""`gpu2dra impact`: what in the cluster finds GPU pods by `nvidia.com/gpu` (or another mapped
resource) and would stop seeing pods once gpu2dra translates them, each with what changes and
what to do. Run it before a namespace is enabled.

It looks at webhook configurations whose rules send them pods and whose match conditions name
a mapped resource (other than gpu2dra's own), known components by their Deployments and
DaemonSets (app/readers/stack.py), custom resources known to read GPU counts, ResourceQuotas
that limit a mapped resource and Kueue ClusterQueues that cover one. `gather` reads the
cluster (GETs only); `analyse` is pure; `render` prints; `command` runs the three.
"""
