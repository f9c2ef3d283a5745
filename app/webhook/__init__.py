"""The admission webhook: the review wire format, /mutate and /validate, the watch caches that
answer them without API calls, template creation, metrics, TLS and the server itself."""
