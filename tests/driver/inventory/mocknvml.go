// The mocked NVML of the inventory: go-nvml's mock server (pkg/nvml/mock/server and the GPU
// configurations of pkg/nvml/mock/gpus, of the go-nvml release tests/driver/go.mod names) with what it lacks or gets wrong for the DRA driver's
// enumeration fixed here:
//   - InitWithFlags, GetAddressingMode and GetVirtualizationMode are not mocked (the driver
//     calls all three; NOT_SUPPORTED and NONE are what an x86 server without vGPU answers);
//   - GetPciInfo leaves BusId empty (the driver publishes it as resource.kubernetes.io/pciBusID);
//   - product names: A100-SXM4-40GB is "Mock NVIDIA A100-SXM4-40GB"; every name is set to what
//     NVML's GetName() returns for that product (the products table);
//   - GPU-instance profile IDs are the NVML profile indexes (GPU_INSTANCE_PROFILE_1_SLICE = 0),
//     where real NVML answers the profile IDs nvidia-smi lists (1g = 19, 7g = 0, ...); the
//     driver names MIG devices after them;
//   - there are no MIG device handles (GetMaxMigDeviceCount, GetMigDeviceHandleByIndex,
//     GetGpuInstanceById, GetComputeInstanceById), so static MIG devices cannot be listed;
//   - UUIDs are random (uuid.New()); here they are derived from the product and the GPU's index;
//   - the H200's MIG profiles are wrong in every field that a real H200 can be checked against
//     (memory, multiprocessors, engines, memory-slice placements: h200 below replaces them
//     with what NVML says on a real one, tests/driver/real/h200).
//
// This file is added to the driver's cmd/gpu-kubelet-plugin (package main) by
// tests/driver/build.sh, next to inventory.go.

package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	nvdev "github.com/NVIDIA/go-nvlib/pkg/nvlib/device"
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	// go-nvml's newer mock, copied into the driver's tree by build.sh (see there).
	"sigs.k8s.io/dra-driver-nvidia-gpu/internal/nvmlmock/gpus"
	"sigs.k8s.io/dra-driver-nvidia-gpu/internal/nvmlmock/server"
)

// product is one GPU model the mock can stand in for.
type product struct {
	config gpus.Config
	// What NVML's GetName() returns for it (the mock's own name may differ).
	nvmlName string
	// What GetAddressingMode answers (NONE where a real one of the product said so; nil:
	// NOT_SUPPORTED, as the driver takes an unknown product to answer, and no attribute).
	addressingMode *nvml.DeviceAddressingModeType
}

var addressingModeNone = nvml.DEVICE_ADDRESSING_MODE_NONE

// The products the inventory's --product accepts, named as in nvidia-smi -L after "NVIDIA ".
var products = map[string]product{
	"A100-SXM4-40GB":  {gpus.A100_SXM4_40GB, "NVIDIA A100-SXM4-40GB", nil},
	"A100-SXM4-80GB":  {gpus.A100_SXM4_80GB, "NVIDIA A100-SXM4-80GB", nil},
	"A100-PCIE-40GB":  {gpus.A100_PCIE_40GB, "NVIDIA A100-PCIE-40GB", nil},
	"H100-SXM5-80GB":  {gpus.H100_SXM5_80GB, "NVIDIA H100 80GB HBM3", nil},
	"H200-SXM5-141GB": {h200, "NVIDIA H200", &addressingModeNone},
	"B200-SXM5-180GB": {gpus.B200_SXM5_180GB, "NVIDIA B200", nil},
}

// NVML's GPU-instance profile IDs (nvidia-smi mig -lgip) by profile index, the same on A100,
// H100, H200 and B200 for the profiles go-nvml's mock defines: 1g 19, 1g+me 20, 1g with two
// memory slices 15, 2g 14, 3g 9, 4g 5, 7g 0.
var giProfileIDs = map[int]uint32{
	nvml.GPU_INSTANCE_PROFILE_1_SLICE:      19,
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1: 20,
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2: 15,
	nvml.GPU_INSTANCE_PROFILE_2_SLICE:      14,
	nvml.GPU_INSTANCE_PROFILE_3_SLICE:      9,
	nvml.GPU_INSTANCE_PROFILE_4_SLICE:      5,
	nvml.GPU_INSTANCE_PROFILE_7_SLICE:      0,
}

// The compute-instance profile that spans a whole GPU instance of n slices.
var ciProfileBySlices = map[uint32]int{
	1: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE,
	2: nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE,
	3: nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE,
	4: nvml.COMPUTE_INSTANCE_PROFILE_4_SLICE,
	6: nvml.COMPUTE_INSTANCE_PROFILE_6_SLICE,
	7: nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE,
	8: nvml.COMPUTE_INSTANCE_PROFILE_8_SLICE,
}

// PCI bus IDs of a DGX A100's eight GPUs, as NVML writes them (8-digit domain).
var dgxBusIDs = []string{
	"00000000:07:00.0", "00000000:0F:00.0", "00000000:47:00.0", "00000000:4E:00.0",
	"00000000:87:00.0", "00000000:90:00.0", "00000000:B7:00.0", "00000000:BD:00.0",
}

// migRequest is one MIG device asked for on one GPU: a profile name such as 1g.5gb, and
// optionally its placement start (otherwise the first free one NVML lists).
type migRequest struct {
	profile string
	start   int // -1: first free placement
}

// mockOptions describes the machine to mock.
type mockOptions struct {
	product           string
	gpus              int
	mig               map[int][]migRequest // GPUs with MIG mode on, and their MIG devices
	driverVersion     string
	cudaDriverVersion int
}

// migInstance is one static MIG device of the mock: its GPU instance, compute instance and
// device handle.
type migInstance struct {
	gi     *mock.GpuInstance
	ci     *mock.ComputeInstance
	handle *mock.Device
	giInfo nvml.GpuInstanceInfo
}

// newMockNVML builds go-nvml's mock server for the options, with the fixes above.
func newMockNVML(o mockOptions) (nvml.Interface, error) {
	p, ok := products[o.product]
	if !ok {
		return nil, fmt.Errorf("unknown product %q (known: %s)", o.product, strings.Join(productNames(), ", "))
	}
	if o.gpus < 1 || o.gpus > len(dgxBusIDs) {
		return nil, fmt.Errorf("--gpus must be 1 to %d, not %d", len(dgxBusIDs), o.gpus)
	}
	config := p.config
	config.Name = p.nvmlName
	srv, err := server.New(
		server.WithGPUs(gpus.Multiple(o.gpus, config)...),
		server.WithDriverVersion(o.driverVersion),
		server.WithNVMLVersion("12."+o.driverVersion),
		server.WithCUDADriverVersion(o.cudaDriverVersion),
	)
	if err != nil {
		return nil, err
	}
	srv.InitWithFlagsFunc = func(uint32) nvml.Return { return nvml.SUCCESS }
	for index, handle := range srv.Devices {
		d := handle.(*server.Device)
		d.UUID = "GPU-" + uuid.NewSHA1(uuid.NameSpaceURL, []byte(fmt.Sprintf("gpu2dra.test/%s/%d", o.product, index))).String()
		d.PciBusID = strings.ToLower(strings.TrimPrefix(dgxBusIDs[index], "0000"))
		fixDevice(d, dgxBusIDs[index], p.addressingMode)
		if requests, on := o.mig[index]; on {
			d.MigMode = nvml.DEVICE_MIG_ENABLE
			if err := createMigDevices(nvdev.New(srv), d, requests); err != nil {
				return nil, fmt.Errorf("GPU %d: %w", index, err)
			}
		}
	}
	for index := range o.mig {
		if index < 0 || index >= o.gpus {
			return nil, fmt.Errorf("--mig names GPU %d; there are %d", index, o.gpus)
		}
	}
	return srv, nil
}

func productNames() []string {
	var names []string
	for name := range products {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// fixDevice adds to one mocked GPU what the driver calls and the mock lacks.
func fixDevice(d *server.Device, busID string, addressingMode *nvml.DeviceAddressingModeType) {
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		info := nvml.PciInfo{PciDeviceId: d.Config.PciDeviceId}
		bus, _ := strconv.ParseUint(busID[9:11], 16, 32)
		info.Bus = uint32(bus)
		for i, c := range busID {
			info.BusId[i] = int8(c)
		}
		for i, c := range busID[4:] {
			info.BusIdLegacy[i] = int8(c)
		}
		return info, nvml.SUCCESS
	}
	d.GetAddressingModeFunc = func() (nvml.DeviceAddressingMode, nvml.Return) {
		if addressingMode == nil {
			return nvml.DeviceAddressingMode{}, nvml.ERROR_NOT_SUPPORTED
		}
		return nvml.DeviceAddressingMode{Value: uint32(*addressingMode)}, nvml.SUCCESS
	}
	d.GetVirtualizationModeFunc = func() (nvml.GpuVirtualizationMode, nvml.Return) {
		return nvml.GPU_VIRTUALIZATION_MODE_NONE, nvml.SUCCESS
	}
	// Profile infos carry NVML's profile IDs, and placements are looked up by them.
	d.GetGpuInstanceProfileInfoFunc = func(index int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
		info, ok := d.Config.MIGProfiles.GpuInstanceProfiles[index]
		if index < 0 || index >= nvml.GPU_INSTANCE_PROFILE_COUNT {
			return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_INVALID_ARGUMENT
		}
		if !ok {
			return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_NOT_SUPPORTED
		}
		id, known := giProfileIDs[index]
		if !known {
			panic(fmt.Sprintf("no NVML profile ID for GPU-instance profile index %d", index))
		}
		info.Id = id
		return info, nvml.SUCCESS
	}
	d.GetGpuInstancePossiblePlacementsFunc = func(info *nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstancePlacement, nvml.Return) {
		for index, id := range giProfileIDs {
			if id == info.Id {
				return d.Config.MIGProfiles.GpuInstancePlacements[index], nvml.SUCCESS
			}
		}
		return nil, nvml.ERROR_NOT_SUPPORTED
	}
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	d.GetMigDeviceHandleByIndexFunc = func(int) (nvml.Device, nvml.Return) { return nil, nvml.ERROR_NOT_FOUND }
}

// profileIndex finds the GPU-instance profile index whose name (as go-nvlib writes it, e.g.
// 1g.5gb or 1g.10gb+me) is the given one.
func profileIndex(lib nvdev.Interface, d *server.Device, name string) (int, error) {
	var known []string
	for index := range nvml.GPU_INSTANCE_PROFILE_COUNT {
		info, ok := d.Config.MIGProfiles.GpuInstanceProfiles[index]
		if !ok {
			continue
		}
		p, err := lib.NewMigProfile(index, ciProfileBySlices[info.SliceCount],
			nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, info.MemorySizeMB, d.MemoryInfo.Total)
		if err != nil {
			return 0, err
		}
		if p.String() == name {
			return index, nil
		}
		known = append(known, p.String())
	}
	return 0, fmt.Errorf("no MIG profile %q on %s (it has %s)", name, d.Config.Name, strings.Join(known, ", "))
}

// createMigDevices gives a MIG-enabled GPU the requested MIG devices, each at its requested
// placement or the first free one, with the handles NVML would list for them.
func createMigDevices(lib nvdev.Interface, d *server.Device, requests []migRequest) error {
	var instances []*migInstance
	used := map[uint32]bool{}
	for n, request := range requests {
		index, err := profileIndex(lib, d, request.profile)
		if err != nil {
			return err
		}
		info, _ := d.GetGpuInstanceProfileInfo(index)
		placement, err := place(d.Config.MIGProfiles.GpuInstancePlacements[index], used, request)
		if err != nil {
			return err
		}
		for slot := placement.Start; slot < placement.Start+placement.Size; slot++ {
			used[slot] = true
		}
		ciIndex := ciProfileBySlices[info.SliceCount]
		ciProfile, ok := d.Config.MIGProfiles.ComputeInstanceProfiles[index][ciIndex]
		if !ok {
			return fmt.Errorf("no compute-instance profile for %s", request.profile)
		}
		m := &migInstance{
			gi:     &mock.GpuInstance{},
			ci:     &mock.ComputeInstance{},
			handle: &mock.Device{},
			giInfo: nvml.GpuInstanceInfo{Device: d, Id: uint32(n + 1), ProfileId: info.Id, Placement: placement},
		}
		ciInfo := nvml.ComputeInstanceInfo{Device: d, GpuInstance: m.gi, Id: 0, ProfileId: ciProfile.Id}
		migUUID := "MIG-" + uuid.NewSHA1(uuid.NameSpaceURL, []byte(fmt.Sprintf("%s/%d", d.UUID, m.giInfo.Id))).String()
		m.gi.GetInfoFunc = func() (nvml.GpuInstanceInfo, nvml.Return) { return m.giInfo, nvml.SUCCESS }
		m.gi.GetComputeInstanceProfileInfoFunc = func(profile, engine int) (nvml.ComputeInstanceProfileInfo, nvml.Return) {
			p, ok := d.Config.MIGProfiles.ComputeInstanceProfiles[index][profile]
			if !ok || engine != nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED {
				return nvml.ComputeInstanceProfileInfo{}, nvml.ERROR_NOT_SUPPORTED
			}
			return p, nvml.SUCCESS
		}
		m.gi.GetComputeInstanceByIdFunc = func(id int) (nvml.ComputeInstance, nvml.Return) {
			if id != 0 {
				return nil, nvml.ERROR_NOT_FOUND
			}
			return m.ci, nvml.SUCCESS
		}
		m.ci.GetInfoFunc = func() (nvml.ComputeInstanceInfo, nvml.Return) { return ciInfo, nvml.SUCCESS }
		m.handle.GetGpuInstanceIdFunc = func() (int, nvml.Return) { return int(m.giInfo.Id), nvml.SUCCESS }
		m.handle.GetComputeInstanceIdFunc = func() (int, nvml.Return) { return 0, nvml.SUCCESS }
		m.handle.GetUUIDFunc = func() (string, nvml.Return) { return migUUID, nvml.SUCCESS }
		instances = append(instances, m)
	}
	d.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i < 0 || i >= len(instances) {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return instances[i].handle, nvml.SUCCESS
	}
	d.GetGpuInstanceByIdFunc = func(id int) (nvml.GpuInstance, nvml.Return) {
		for _, m := range instances {
			if int(m.giInfo.Id) == id {
				return m.gi, nvml.SUCCESS
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	return nil
}

// place picks the placement of a request: its own start, or the first free one, among those
// NVML lists for the profile.
func place(placements []nvml.GpuInstancePlacement, used map[uint32]bool, request migRequest) (nvml.GpuInstancePlacement, error) {
	var starts []string
	for _, p := range placements {
		starts = append(starts, strconv.Itoa(int(p.Start)))
		if request.start >= 0 && int(p.Start) != request.start {
			continue
		}
		free := true
		for slot := p.Start; slot < p.Start+p.Size; slot++ {
			free = free && !used[slot]
		}
		if free {
			return p, nil
		}
	}
	if request.start >= 0 {
		return nvml.GpuInstancePlacement{}, fmt.Errorf("%s cannot start at %d (starts: %s; taken or invalid)",
			request.profile, request.start, strings.Join(starts, ","))
	}
	return nvml.GpuInstancePlacement{}, fmt.Errorf("no free placement left for %s", request.profile)
}

// h200 is an H200 (SXM, 141 GB) as NVML describes it on a real one (driver 580.159.04:
// tests/driver/real/h200, nvidia-smi-mig-lgip.txt and -lgipp.txt), where go-nvml's mock
// (gpus.H200_SXM5_141GB) has its memory 144384 MiB, not 143771 MiB; MIG memory the nominal
// size, not 16384, 33280, 71424 and 143360 MiB (so its 1g profile was named 1g.35gb); 16 to
// 112 multiprocessors, not 16, 26, 32, 60, 64 and 132; fewer decoders, JPEG and copy
// engines; and placements in compute slices where NVML counts memory slices (eight: 1g.35gb
// takes two at even starts, 3g and 4g four, 7g all eight).
var h200 = func() gpus.Config {
	c := gpus.H200_SXM5_141GB
	c.MemoryMB = 143771
	// GPU-instance profile index: NVML profile ID, slices, instances, multiprocessors, copy
	// engines, decoders, JPEG, OFA, memory (MiB), placement starts and size (memory slices).
	type row struct {
		index                          int
		slices, instances, sm, ce, dec uint32
		jpeg, ofa                      uint32
		memoryMB                       uint64
		starts                         []uint32
		size                           uint32
	}
	rows := []row{
		{nvml.GPU_INSTANCE_PROFILE_1_SLICE, 1, 7, 16, 1, 1, 1, 0, 16384, []uint32{0, 1, 2, 3, 4, 5, 6}, 1},
		{nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, 1, 1, 16, 1, 1, 1, 1, 16384, []uint32{0, 1, 2, 3, 4, 5, 6}, 1},
		{nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2, 1, 4, 26, 1, 1, 1, 0, 33280, []uint32{0, 2, 4, 6}, 2},
		{nvml.GPU_INSTANCE_PROFILE_2_SLICE, 2, 3, 32, 2, 2, 2, 0, 33280, []uint32{0, 2, 4}, 2},
		{nvml.GPU_INSTANCE_PROFILE_3_SLICE, 3, 2, 60, 3, 3, 3, 0, 71424, []uint32{0, 4}, 4},
		{nvml.GPU_INSTANCE_PROFILE_4_SLICE, 4, 1, 64, 4, 4, 4, 0, 71424, []uint32{0}, 4},
		{nvml.GPU_INSTANCE_PROFILE_7_SLICE, 7, 1, 132, 8, 7, 7, 1, 143360, []uint32{0}, 8},
	}
	c.MIGProfiles.GpuInstanceProfiles = map[int]nvml.GpuInstanceProfileInfo{}
	c.MIGProfiles.GpuInstancePlacements = map[int][]nvml.GpuInstancePlacement{}
	c.MIGProfiles.ComputeInstanceProfiles = map[int]map[int]nvml.ComputeInstanceProfileInfo{}
	for _, r := range rows {
		c.MIGProfiles.GpuInstanceProfiles[r.index] = nvml.GpuInstanceProfileInfo{
			Id: uint32(r.index), SliceCount: r.slices, InstanceCount: r.instances,
			MultiprocessorCount: r.sm, CopyEngineCount: r.ce, DecoderCount: r.dec,
			JpegCount: r.jpeg, OfaCount: r.ofa, MemorySizeMB: r.memoryMB,
		}
		for _, start := range r.starts {
			c.MIGProfiles.GpuInstancePlacements[r.index] = append(c.MIGProfiles.GpuInstancePlacements[r.index],
				nvml.GpuInstancePlacement{Start: start, Size: r.size})
		}
		// The compute instance that spans the GPU instance (the only one the inventory creates).
		ci := ciProfileBySlices[r.slices]
		c.MIGProfiles.ComputeInstanceProfiles[r.index] = map[int]nvml.ComputeInstanceProfileInfo{
			ci: {Id: uint32(ci), SliceCount: r.slices, InstanceCount: 1, MultiprocessorCount: r.sm},
		}
	}
	return c
}()
