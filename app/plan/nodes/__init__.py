"""`gpu2dra nodes plan`: which device-plugin nodes to convert to the DRA driver, for what the
enabled and audit namespaces need, and what it costs the pods that stay."""
