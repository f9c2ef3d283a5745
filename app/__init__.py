"""gpu2dra: move nvidia.com/gpu workloads onto Kubernetes Dynamic Resource Allocation."""
