"""`gpu2dra capacity`: what the namespaces gpu2dra translates (enabled) or audits ask of DRA,
by shape (class, product, MIG profile, shares), against the devices ResourceSlices publish
and no claim holds; the device plugin's capacity left; the node autoscalers and whether each
can add DRA nodes; and, in sentences, what enabling each namespace needs. Run it before a
namespace is enabled.

`gather` reads the cluster (GETs only); `analyse` is pure, over the demand and supply of
app/readers/demand.py and supply.py, which doctor's checks read too; `render` prints;
`command` runs the three.
"""
