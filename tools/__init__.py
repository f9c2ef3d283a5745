"""What a developer runs by hand beside the tests: the generators of the checked-in references
(`python -m tools.gendocs --write`, `python -m tools.chartdocs --write`) and of the Kubernetes
types in the chart's schema (`python -m tools.k8s_schema`). The tests only compare their output
with the files in the tree."""
