"""`gpu2dra exporter`, its own Deployment: which pod holds which GPU, as gpu2dra_pod_gpu_info.
`gpuinfo.py` is the pure join, `collector.py` the metric family written from the caches, and
`server.py` the caches, the plain-HTTP server and its probes."""
