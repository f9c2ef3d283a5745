"""`gpu2dra quota -n NS | kubectl apply -f -`: the DRA-side ResourceQuotas that keep translated
pods under the namespace's legacy GPU quotas.

For each ResourceQuota that limits a mapped legacy resource (`requests.nvidia.com/gpu: 4`),
one named `gpu2dra-dra-<name>` limits the devices of the class it maps to
(`gpu.nvidia.com.deviceclass.resource.k8s.io/devices: 4`). Printed, never applied: review it,
apply it, or keep it in Git. Read from the cluster (GETs only) or from a file (`read`);
`render` is pure; `command` runs the two.
"""
