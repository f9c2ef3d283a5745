"""What the two serving processes, the webhook and the exporter, share to watch the cluster:
the client they connect with, maps kept equal to the cluster by list + watch, and the
metrics of those caches."""
