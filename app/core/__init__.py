"""The translation core: pure functions of a pod spec, the policy and the cluster's DeviceClasses.

Nothing here does I/O or imports the kubernetes client, FastAPI or uvicorn: the webhook, the
manifest tools and the troubleshooting commands all build on it.
"""
