"""`gpu2dra deviceclasses`: a DeviceClass per MIG profile, for the in-tree path to serve
`nvidia.com/mig-<profile>` (KEP-5004), as YAML for `kubectl apply` or GitOps.

The profiles come from the cluster's ResourceSlices (the MIG devices the NVIDIA driver
publishes), or from `--profiles` without a cluster; `render` prints them, `command` runs it.
"""
