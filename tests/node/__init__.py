"""The real node of the end-to-end tests: build.sh, the fake DRA kubelet plugin, node.py."""
