"""What the chart's ClusterRole grants gpu2dra: the rendered chart and the installed one alike."""

from __future__ import annotations

# What the webhook may do, and nothing more (besides what every authenticated user may).
GRANTED = {
    ("", "namespaces", "list"),
    ("", "namespaces", "watch"),
    ("", "resourcequotas", "list"),
    ("", "resourcequotas", "watch"),
    ("resource.k8s.io", "deviceclasses", "list"),
    ("resource.k8s.io", "deviceclasses", "watch"),
    ("resource.k8s.io", "resourceslices", "list"),
    ("resource.k8s.io", "resourceslices", "watch"),
    ("resource.k8s.io", "resourceclaimtemplates", "get"),
    ("resource.k8s.io", "resourceclaimtemplates", "list"),
    ("resource.k8s.io", "resourceclaimtemplates", "watch"),
    ("resource.k8s.io", "resourceclaimtemplates", "create"),
    ("resource.k8s.io", "resourceclaims", "get"),
    ("", "configmaps", "list"),  # kueue-manager-config only
    ("", "configmaps", "watch"),
    ("apps", "deployments", "list"),  # Kueue's manager, the node autoscalers' (by label)
    ("apps", "deployments", "watch"),
}
