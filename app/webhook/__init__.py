"""The admission webhook: the review wire format and its verdicts, /mutate and /validate, the
cluster view its watch caches give, template creation, metrics, TLS and the server itself."""
