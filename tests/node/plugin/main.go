// gpu-kubelet-plugin is a fake of the NVIDIA DRA driver's kubelet plugin (driver
// gpu.nvidia.com) for gpu2dra's end-to-end tests on a real node. It runs as a host process
// next to the kubelet, publishes the devices of a JSON inventory as the node's ResourceSlice
// (the tests generate it shaped like the driver's: gpu-<i>, gpu-<i>-mig-<profile>-<gi>-<start>)
// and prepares claims by writing one CDI spec per claim that only sets environment variables:
//
//	GPU2DRA_DEVICE_<DEVICE>=<uuid>         one per device the container got
//	GPU2DRA_CLAIM_<CLAIM>=<dev>,<dev>      the devices of that claim, sorted
//	GPU2DRA_SHARING_<DEVICE>=<strategy>    a GpuConfig's sharing.strategy for that device
//
// <DEVICE> and <CLAIM> are the device and claim names upper-cased with '-' and '.' turned
// into '_' (device names are DNS labels, so lower-casing and '_' -> '-' gives the name back).
// Unpreparing a claim removes its CDI spec.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
)

const (
	driverName = "gpu.nvidia.com"
	// The CDI kind of the per-claim specs: CDI device IDs are <cdiKind>=<claim UID>-<device>.
	cdiKind    = "gpu2dra.test/gpu"
	cdiVersion = "0.6.0"
	// Opaque configuration of the NVIDIA driver that this plugin understands.
	configAPIVersion = "resource.nvidia.com/v1beta1"
	configKind       = "GpuConfig"
)

type plugin struct {
	nodeName string
	cdiDir   string
	devices  map[string]resourceapi.Device
	cancel   context.CancelCauseFunc

	mutex sync.Mutex
}

func main() {
	var (
		kubeconfig   = flag.String("kubeconfig", "", "kubeconfig of the plugin's API identity")
		nodeName     = flag.String("node-name", "", "the node (and pool) name")
		inventory    = flag.String("devices", "", "JSON file: a list of resource.k8s.io/v1 Devices to publish")
		cdiDir       = flag.String("cdi-dir", "/var/run/cdi", "where the container runtime reads CDI specs")
		registrarDir = flag.String("registrar-dir", kubeletplugin.KubeletRegistryDir, "the kubelet's plugin registration directory")
		pluginDir    = flag.String("plugin-dir", "", "the directory for the plugin's socket (default <kubelet plugins dir>/gpu.nvidia.com)")
		shares       = flag.String("consumable-shares", "", "share the devices as the NVIDIA driver does: a number of shares, memory or unlimited")
	)
	klog.InitFlags(nil)
	flag.Parse()
	if err := run(*kubeconfig, *nodeName, *inventory, *cdiDir, *registrarDir, *pluginDir, *shares); err != nil {
		klog.ErrorS(err, "gpu-kubelet-plugin failed")
		klog.Flush()
		os.Exit(1)
	}
}

func run(kubeconfig, nodeName, inventory, cdiDir, registrarDir, pluginDir, shares string) error {
	if nodeName == "" || inventory == "" {
		return errors.New("--node-name and --devices are required")
	}
	devices, err := readInventory(inventory)
	if err != nil {
		return err
	}
	if devices, err = consumableShares(devices, shares); err != nil {
		return err
	}
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	if pluginDir == "" {
		pluginDir = filepath.Join(kubeletplugin.KubeletPluginsDir, driverName)
	}
	for _, dir := range []string{cdiDir, registrarDir, pluginDir} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return err
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	p := &plugin{nodeName: nodeName, cdiDir: cdiDir, devices: map[string]resourceapi.Device{}, cancel: cancel}
	for _, device := range devices {
		p.devices[device.Name] = device
	}
	options := append([]kubeletplugin.Option{
		kubeletplugin.DriverName(driverName),
		kubeletplugin.KubeClient(client),
		kubeletplugin.NodeName(nodeName),
		kubeletplugin.RegistrarDirectoryPath(registrarDir),
		kubeletplugin.PluginDataDirectoryPath(pluginDir),
	}, releaseOptions...)
	helper, err := kubeletplugin.Start(ctx, p, options...)
	if err != nil {
		return fmt.Errorf("start kubelet plugin: %w", err)
	}
	defer helper.Stop()

	resources := resourceslice.DriverResources{
		Pools: map[string]resourceslice.Pool{
			nodeName: {Slices: []resourceslice.Slice{{Devices: devices}}},
		},
	}
	if err := helper.PublishResources(ctx, resources); err != nil {
		return fmt.Errorf("publish resources: %w", err)
	}
	klog.InfoS("gpu-kubelet-plugin running", "node", nodeName, "devices", len(devices), "cdiDir", cdiDir)
	<-ctx.Done()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

func readInventory(path string) ([]resourceapi.Device, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var devices []resourceapi.Device
	if err := json.Unmarshal(data, &devices); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return devices, nil
}

// PrepareResourceClaims writes one CDI spec per claim and returns its device IDs.
func (p *plugin) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	p.mutex.Lock()
	defer p.mutex.Unlock()
	results := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		devices, err := p.prepare(claim)
		results[claim.UID] = kubeletplugin.PrepareResult{Devices: devices, Err: err}
		klog.FromContext(ctx).Info("prepared", "claim", klog.KObj(claim), "uid", claim.UID, "devices", len(devices), "err", err)
	}
	return results, nil
}

type cdiSpec struct {
	CDIVersion string      `json:"cdiVersion"`
	Kind       string      `json:"kind"`
	Devices    []cdiDevice `json:"devices"`
}

type cdiDevice struct {
	Name           string            `json:"name"`
	ContainerEdits cdiContainerEdits `json:"containerEdits"`
}

type cdiContainerEdits struct {
	Env []string `json:"env"`
}

type gpuConfig struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Sharing    *struct {
		Strategy string `json:"strategy"`
	} `json:"sharing,omitempty"`
}

func (p *plugin) prepare(claim *resourceapi.ResourceClaim) ([]kubeletplugin.Device, error) {
	if claim.Status.Allocation == nil {
		return nil, fmt.Errorf("claim %s is not allocated", klog.KObj(claim))
	}
	allocation := claim.Status.Allocation.Devices
	var mine []resourceapi.DeviceRequestAllocationResult
	for _, result := range allocation.Results {
		if result.Driver != driverName {
			continue
		}
		if result.Pool != p.nodeName {
			return nil, fmt.Errorf("device %s/%s is not in this node's pool", result.Pool, result.Device)
		}
		if _, ok := p.devices[result.Device]; !ok {
			return nil, fmt.Errorf("no device %s on this node", result.Device)
		}
		mine = append(mine, result)
	}
	names := make([]string, 0, len(mine))
	for _, result := range mine {
		names = append(names, result.Device)
	}
	sort.Strings(names)
	claimEnv := "GPU2DRA_CLAIM_" + envName(claim.Name) + "=" + strings.Join(names, ",")

	spec := cdiSpec{CDIVersion: cdiVersion, Kind: cdiKind}
	devices := make([]kubeletplugin.Device, 0, len(mine))
	for _, result := range mine {
		uuid := ""
		if attribute, ok := p.devices[result.Device].Attributes["uuid"]; ok && attribute.StringValue != nil {
			uuid = *attribute.StringValue
		}
		env := []string{"GPU2DRA_DEVICE_" + envName(result.Device) + "=" + uuid, claimEnv}
		strategy, err := sharingStrategy(allocation.Config, result.Request)
		if err != nil {
			return nil, err
		}
		if strategy != "" {
			env = append(env, "GPU2DRA_SHARING_"+envName(result.Device)+"="+strategy)
		}
		cdiName := string(claim.UID) + "-" + result.Device
		spec.Devices = append(spec.Devices, cdiDevice{Name: cdiName, ContainerEdits: cdiContainerEdits{Env: env}})
		devices = append(devices, kubeletplugin.Device{
			Requests:     []string{result.Request},
			PoolName:     result.Pool,
			DeviceName:   result.Device,
			CDIDeviceIDs: []string{cdiKind + "=" + cdiName},
		})
	}
	if err := p.writeSpec(claim.UID, spec); err != nil {
		return nil, err
	}
	return devices, nil
}

// sharingStrategy is the sharing.strategy of the last GpuConfig (class configs come first,
// then the claim's, so the claim's wins) that applies to the request ("req" or "req/sub").
func sharingStrategy(configs []resourceapi.DeviceAllocationConfiguration, request string) (string, error) {
	strategy := ""
	parent, _, _ := strings.Cut(request, "/")
	for _, config := range configs {
		if config.Opaque == nil || config.Opaque.Driver != driverName {
			continue
		}
		if len(config.Requests) > 0 && !contains(config.Requests, request) && !contains(config.Requests, parent) {
			continue
		}
		var parsed gpuConfig
		if err := json.Unmarshal(config.Opaque.Parameters.Raw, &parsed); err != nil {
			return "", fmt.Errorf("opaque config: %w", err)
		}
		if parsed.APIVersion != configAPIVersion || parsed.Kind != configKind {
			return "", fmt.Errorf("unsupported opaque config %s %s", parsed.APIVersion, parsed.Kind)
		}
		if parsed.Sharing != nil {
			strategy = parsed.Sharing.Strategy
		}
	}
	return strategy, nil
}

func contains(list []string, value string) bool {
	for _, item := range list {
		if item == value {
			return true
		}
	}
	return false
}

func envName(name string) string {
	return strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(name))
}

func (p *plugin) specPath(uid types.UID) string {
	return filepath.Join(p.cdiDir, "gpu2dra-test-"+string(uid)+".json")
}

func (p *plugin) writeSpec(uid types.UID, spec cdiSpec) error {
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return err
	}
	path := p.specPath(uid)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// UnprepareResourceClaims removes the claims' CDI specs; a missing spec is fine.
func (p *plugin) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	p.mutex.Lock()
	defer p.mutex.Unlock()
	results := make(map[types.UID]error, len(claims))
	for _, claim := range claims {
		err := os.Remove(p.specPath(claim.UID))
		if errors.Is(err, os.ErrNotExist) {
			err = nil
		}
		results[claim.UID] = err
		klog.FromContext(ctx).Info("unprepared", "claim", claim.String(), "err", err)
	}
	return results, nil
}

// HandleError logs background errors; one that is not recoverable stops the plugin.
func (p *plugin) HandleError(ctx context.Context, err error, msg string) {
	klog.FromContext(ctx).Error(err, msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) {
		p.cancel(fmt.Errorf("%s: %w", msg, err))
	}
}
