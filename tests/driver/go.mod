// The versions tests/driver/build.sh builds the inventory from: NVIDIA's DRA driver (its
// kubelet plugin's package, with inventory/*.go added) and the go-nvml release whose mock GPUs
// it copies into the driver's tree. Nothing is built in this module itself; go.sum checks
// what `go mod download` fetches, and pins the k8s.io/kubernetes release build.sh builds the
// driver with in place of the release candidate it requires, which the module proxy refuses.
module gpu2dra.test/driver

go 1.26.0

require (
	github.com/NVIDIA/go-nvml v0.13.4-1
	sigs.k8s.io/dra-driver-nvidia-gpu v0.5.0
)
