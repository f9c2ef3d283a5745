"""`gpu2dra prune-templates`: delete gpu2dra's ResourceClaimTemplates that no pod uses.

gpu2dra makes a template per shape of pod request and never deletes one: pods use them, and
the next pod of that shape uses it again. Workloads come and go, and templates of shapes no
longer run stay behind. This command finds them; it deletes them only with `--apply`.

A template is in use while a pod that is neither Succeeded nor Failed names it in
spec.resourceClaims[].resourceClaimTemplateName, or while a workload's pod template does
(Deployments, StatefulSets, DaemonSets, ReplicaSets, Jobs, CronJobs): a Deployment at 0
replicas or a CronJob between runs has no pod, and its next pods need the template. A template
made for a pod the API server then refused (invalid, or denied by a later admission check) is
named by nothing and goes like any other unused one. A template is never deleted while in
use: just before each delete the namespace's pods and workloads are listed again, and the
delete carries the template's uid and resourceVersion as preconditions. A template younger
than `--min-age` is kept too: gpu2dra creates it before the pod that needs it is stored. A pod
admitted in the moment between the last look and the delete is the one race left; its claim
cannot be made, `gpu2dra explain` says so, and recreating the pod makes the template again.
"""
