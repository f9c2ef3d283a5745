"""`gpu2dra version`: the client's version and, where a cluster answers, its Kubernetes version
and the gpu2dra webhook's (its Deployments' version label and image)."""
