// The inventory: prints, as JSON, the devices NVIDIA's DRA driver (its kubelet plugin,
// cmd/gpu-kubelet-plugin) publishes in its ResourceSlices, built by the driver's own code
// (deviceLib.enumerateAllPossibleDevices, then GetDevice or, under DynamicMIG, PartGetDevice
// and GenerateDriverResources, each applying --consumable-shares as the plugin's flag does), on
// a mocked NVML (mocknvml.go) or on the machine's own.
//
// tests/driver/build.sh copies the driver's module out of the Go module cache, adds this file
// and mocknvml.go to cmd/gpu-kubelet-plugin and renames the plugin's main to upstreamMain, so
// this main is the binary's (and the plugin's server code is left out by the linker).
//
//	inventory --product A100-SXM4-40GB --gpus 8 --mig 0=3g.20gb,2g.10gb,1g.5gb --mig 1=1g.10gb,1g.10gb
//	inventory --product H100-SXM5-80GB --dynamic-mig --slices
//	inventory --product A100-SXM4-40GB --gpus 2 --consumable-shares 4
//	inventory --real --driver-root /            (the machine's libnvidia-ml.so.1)

package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	nvdev "github.com/NVIDIA/go-nvlib/pkg/nvlib/device"
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"sigs.k8s.io/dra-driver-nvidia-gpu/pkg/featuregates"
)

// migFlag collects --mig GPU=PROFILE[@START],... flags.
type migFlag map[int][]migRequest

func (m migFlag) String() string { return fmt.Sprint(map[int][]migRequest(m)) }

func (m migFlag) Set(value string) error {
	gpu, list, ok := strings.Cut(value, "=")
	if !ok {
		return fmt.Errorf("want GPU=PROFILE[@START],..., not %q", value)
	}
	index, err := strconv.Atoi(gpu)
	if err != nil {
		return fmt.Errorf("not a GPU index: %q", gpu)
	}
	if _, twice := m[index]; twice {
		return fmt.Errorf("GPU %d named twice", index)
	}
	requests := []migRequest{}
	for _, item := range strings.Split(list, ",") {
		if item == "" {
			continue
		}
		profile, start, explicit := strings.Cut(item, "@")
		request := migRequest{profile: profile, start: -1}
		if explicit {
			if request.start, err = strconv.Atoi(start); err != nil || request.start < 0 {
				return fmt.Errorf("not a placement start: %q", item)
			}
		}
		requests = append(requests, request)
	}
	m[index] = requests
	return nil
}

type options struct {
	mock         mockOptions
	real         bool
	driverRoot   string
	dynamicMIG   bool
	consumable   string
	featureGates string
	slices       bool
	combined     bool
	nodeName     string
	verbose      bool
}

func parseFlags(args []string) (*options, error) {
	o := &options{mock: mockOptions{mig: map[int][]migRequest{}}}
	fs := flag.NewFlagSet("inventory", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: inventory [flags]\n\nThe devices NVIDIA's DRA driver %s publishes, as JSON.\n\n", driverVersion)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.mock.product, "product", "A100-SXM4-40GB", "mocked GPU model: "+strings.Join(productNames(), ", "))
	fs.IntVar(&o.mock.gpus, "gpus", 1, "mocked GPUs")
	fs.Var(migFlag(o.mock.mig), "mig", "GPU=PROFILE[@START],...: MIG mode on for that GPU, with these MIG devices (e.g. 0=3g.20gb,1g.5gb@6; 0= for none); repeat per GPU")
	fs.StringVar(&o.mock.driverVersion, "driver-version", "580.82.07", "mocked NVIDIA driver version")
	fs.IntVar(&o.mock.cudaDriverVersion, "cuda-driver-version", 13000, "mocked CUDA driver version, as NVML gives it (13000 = 13.0)")
	fs.BoolVar(&o.real, "real", false, "enumerate the machine's GPUs through its libnvidia-ml.so.1 instead of a mock")
	fs.StringVar(&o.driverRoot, "driver-root", "/", "with --real: the root under which the driver's libnvidia-ml.so.1 is found, as the plugin's --container-driver-root")
	fs.BoolVar(&o.dynamicMIG, "dynamic-mig", false, "the driver's DynamicMIG feature gate: every possible MIG placement is a device drawing on shared counters")
	fs.StringVar(&o.consumable, "consumable-shares", "disabled", "the plugin's --consumable-shares (disabled, memory, unlimited or a positive integer), with its ConsumableShares feature gate: devices allow multiple allocations and offer consumable capacity")
	fs.StringVar(&o.featureGates, "feature-gates", "", "other driver feature gates, A=true,B=false")
	fs.BoolVar(&o.slices, "slices", false, "print the ResourceSlice specs of the node's pool instead of the devices")
	fs.BoolVar(&o.combined, "combined-slices", false, "with --dynamic-mig --slices: counters and devices in one slice per GPU, as for Kubernetes 1.34 (default: split, as for 1.35+)")
	fs.StringVar(&o.nodeName, "node", "gpu-node", "node name for --slices")
	fs.BoolVar(&o.verbose, "v", false, "the driver's log on standard error")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	return o, nil
}

// The driver's version, set by build.sh with -X.
var driverVersion = "unknown"

func main() {
	o, err := parseFlags(os.Args[1:])
	if err == flag.ErrHelp {
		return
	}
	if err == nil {
		err = run(o, os.Stdout)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "inventory: %v\n", err)
		os.Exit(1)
	}
}

func run(o *options, out io.Writer) error {
	if !o.verbose {
		klog.LogToStderr(false)
		klog.SetOutput(io.Discard)
	}
	gates := map[string]bool{}
	if o.featureGates != "" {
		for _, item := range strings.Split(o.featureGates, ",") {
			name, value, _ := strings.Cut(item, "=")
			on, err := strconv.ParseBool(value)
			if err != nil {
				return fmt.Errorf("--feature-gates: %q", item)
			}
			gates[name] = on
		}
	}
	if o.dynamicMIG {
		gates[string(featuregates.DynamicMIG)] = true
	}
	if o.consumable != "disabled" {
		gates[string(featuregates.ConsumableShares)] = true
	}
	if err := featuregates.FeatureGates().SetFromMap(gates); err != nil {
		return err
	}
	if err := featuregates.ValidateFeatureGates(); err != nil {
		return err
	}
	// The plugin's configuration, as far as publishing devices reads it.
	config := &Config{flags: &Flags{consumableShares: o.consumable}}
	if err := validateCLIFlags(config.flags); err != nil {
		return err
	}

	lib, err := newInventoryDeviceLib(o)
	if err != nil {
		return err
	}
	allocatable, err := lib.enumerateAllPossibleDevices()
	if err != nil {
		return err
	}

	var result any
	switch {
	case o.slices:
		result = poolSlices(o, config, allocatable)
	default:
		result = devices(config, allocatable)
	}
	encoded, err := json.MarshalIndent(result, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s\n", encoded)
	return err
}

// newInventoryDeviceLib builds the driver's deviceLib as newDeviceLib does, on the mock or on
// the machine's NVML (without looking for nvidia-smi, which enumeration does not use).
func newInventoryDeviceLib(o *options) (*deviceLib, error) {
	var nvmllib nvml.Interface
	libraryPath := ""
	devRoot := "/"
	if o.real {
		driverRoot := root(o.driverRoot)
		path, err := driverRoot.getDriverLibraryPath()
		if err != nil {
			return nil, fmt.Errorf("failed to locate driver libraries under %s: %w", o.driverRoot, err)
		}
		libraryPath = path
		devRoot = driverRoot.getDevRoot()
		nvmllib = nvml.New(nvml.WithLibraryPath(libraryPath))
	} else {
		mocked, err := newMockNVML(o.mock)
		if err != nil {
			return nil, err
		}
		nvmllib = mocked
	}
	d := &deviceLib{
		Interface:         nvdev.New(nvmllib),
		nvmllib:           nvmllib,
		driverLibraryPath: libraryPath,
		devRoot:           devRoot,
		gpuInfosByUUID:    make(map[string]*GpuInfo),
		gpuUUIDbyPCIBusID: make(map[PCIBusID]string),
		devhandleByUUID:   make(map[string]nvml.Device),
	}
	if featuregates.Enabled(featuregates.DynamicMIG) {
		if err := d.Init(); err != nil {
			return nil, fmt.Errorf("failed to initialize NVML: %w", err)
		}
	}
	return d, nil
}

// ordered walks the allocatable devices as the driver's DynamicMIG publisher does: GPUs by PCI
// bus ID, then devices by name. (Without DynamicMIG, publishResources walks its maps in Go's
// random order; the slice is the same set of devices.)
func ordered(all *PerGPUAllocatableDevices, visit func(AllocatableDevices, *AllocatableDevice)) {
	for _, busID := range slices.Sorted(maps.Keys(all.allocatablesMap)) {
		devices := all.allocatablesMap[busID]
		for _, name := range slices.Sorted(maps.Keys(devices)) {
			visit(devices, devices[name])
		}
	}
}

// devices: what publishResources puts in the node's slices, device by device.
func devices(config *Config, all *PerGPUAllocatableDevices) []resourceapi.Device {
	list := []resourceapi.Device{}
	ordered(all, func(_ AllocatableDevices, device *AllocatableDevice) {
		if featuregates.Enabled(featuregates.DynamicMIG) {
			list = append(list, device.PartGetDevice(config))
		} else {
			list = append(list, device.GetDevice(config))
		}
	})
	return list
}

// poolSlices: the ResourceSlice specs of the node's pool, as publishResources hands them to
// the kubelet plugin helper.
func poolSlices(o *options, config *Config, all *PerGPUAllocatableDevices) []resourceapi.ResourceSliceSpec {
	var specs []resourceapi.ResourceSliceSpec
	if featuregates.Enabled(featuregates.DynamicMIG) {
		d := &driver{state: &DeviceState{perGPUAllocatable: all, config: config}, useSplitResourceSlices: !o.combined}
		for _, slice := range d.GenerateDriverResources(o.nodeName).Pools[o.nodeName].Slices {
			specs = append(specs, resourceapi.ResourceSliceSpec{Devices: slice.Devices, SharedCounters: slice.SharedCounters})
		}
	} else {
		specs = []resourceapi.ResourceSliceSpec{{Devices: devices(config, all)}}
	}
	for i := range specs {
		specs[i].Driver = DriverName
		specs[i].Pool = resourceapi.ResourcePool{Name: o.nodeName, ResourceSliceCount: int64(len(specs))}
		specs[i].NodeName = ptr.To(o.nodeName)
	}
	return specs
}
