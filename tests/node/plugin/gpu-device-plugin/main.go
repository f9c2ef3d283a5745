// gpu-device-plugin is a fake of the NVIDIA device plugin for gpu2dra's end-to-end tests on a
// real node: a host process on the kubelet's device-plugin API (deviceplugin/v1beta1) that
// registers nvidia.com/gpu and advertises the whole GPUs of the same JSON inventory the fake
// DRA plugin publishes (devices whose type attribute is "gpu"), each by its UUID. Allocate
// answers with environment variables only:
//
//	NVIDIA_VISIBLE_DEVICES=<uuid>,<uuid>   as the NVIDIA device plugin sets it
//	GPU2DRA_DEVICE_<DEVICE>=<uuid>         one per GPU, named as the DRA plugin names them
//
// It re-registers when the kubelet's socket is made anew (a kubelet restart removes every
// plugin socket). On SIGTERM it closes its socket: the kubelet's ListAndWatch stream ends, it
// marks the GPUs unhealthy at once (allocatable nvidia.com/gpu 0) and, five minutes later,
// drops them from capacity too (capacity 0).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/klog/v2"
	api "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

const resourceName = "nvidia.com/gpu"

// device is what the plugin reads of a resource.k8s.io/v1 Device of the inventory.
type device struct {
	Name       string `json:"name"`
	Attributes map[string]struct {
		String *string `json:"string"`
	} `json:"attributes"`
}

type plugin struct {
	api.UnimplementedDevicePluginServer
	names map[string]string // uuid -> device name
	stop  chan struct{}
}

func main() {
	var (
		inventory = flag.String("devices", "", "JSON file: the resource.k8s.io/v1 Devices of the DRA plugin's inventory")
		uuids     = flag.String("uuids", "", "or: a comma-separated list of GPU UUIDs (named gpu-0, gpu-1, ... in order)")
		socketDir = flag.String("device-plugin-dir", api.DevicePluginPath, "the kubelet's device-plugin directory (kubelet.sock)")
		endpoint  = flag.String("endpoint", "gpu2dra-gpu.sock", "the plugin's socket name in --device-plugin-dir")
	)
	klog.InitFlags(nil)
	flag.Parse()
	if err := run(*inventory, *uuids, *socketDir, *endpoint); err != nil {
		klog.ErrorS(err, "gpu-device-plugin failed")
		klog.Flush()
		os.Exit(1)
	}
}

func run(inventory, uuids, socketDir, endpoint string) error {
	names, err := gpus(inventory, uuids)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return errors.New("no GPU to advertise: give --devices or --uuids")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	kubelet := filepath.Join(socketDir, filepath.Base(api.KubeletSocket))
	socket := filepath.Join(socketDir, endpoint)
	var registered os.FileInfo
	var server *grpc.Server
	var p *plugin
	defer func() {
		if server != nil {
			close(p.stop)
			server.Stop()
		}
		_ = os.Remove(socket)
		klog.InfoS("gpu-device-plugin stopped")
	}()
	for {
		// A kubelet (re)started makes kubelet.sock anew and removes the plugins' sockets:
		// serve again and register again.
		info, err := os.Stat(kubelet)
		if err == nil && (registered == nil || !os.SameFile(info, registered)) {
			if server != nil {
				close(p.stop)
				server.Stop()
			}
			p = &plugin{names: names, stop: make(chan struct{})}
			if server, err = serve(p, socket); err != nil {
				return err
			}
			if err := register(ctx, kubelet, endpoint); err != nil {
				klog.ErrorS(err, "registration failed; retrying")
			} else {
				registered = info
				klog.InfoS("gpu-device-plugin registered", "resource", resourceName, "gpus", len(names), "socket", socket)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// gpus maps UUID -> device name: the inventory's whole GPUs, or the UUIDs given in order.
func gpus(inventory, uuids string) (map[string]string, error) {
	names := map[string]string{}
	if uuids != "" {
		for i, uuid := range strings.Split(uuids, ",") {
			names[strings.TrimSpace(uuid)] = fmt.Sprintf("gpu-%d", i)
		}
		return names, nil
	}
	data, err := os.ReadFile(inventory)
	if err != nil {
		return nil, err
	}
	var devices []device
	if err := json.Unmarshal(data, &devices); err != nil {
		return nil, fmt.Errorf("%s: %w", inventory, err)
	}
	for _, d := range devices {
		kind, uuid := d.Attributes["type"].String, d.Attributes["uuid"].String
		// A GPU in MIG mode publishes only its MIG devices: the device plugin's "none" MIG
		// strategy would offer the GPU itself, which this inventory no longer names.
		if uuid != nil && (kind == nil || *kind == "gpu") {
			names[*uuid] = d.Name
		}
	}
	return names, nil
}

func serve(p *plugin, socket string) (*grpc.Server, error) {
	if err := os.MkdirAll(filepath.Dir(socket), 0o750); err != nil {
		return nil, err
	}
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	listener, err := net.Listen("unix", socket)
	if err != nil {
		return nil, err
	}
	server := grpc.NewServer()
	api.RegisterDevicePluginServer(server, p)
	go func() {
		if err := server.Serve(listener); err != nil {
			klog.ErrorS(err, "serving the device plugin API")
		}
	}()
	return server, nil
}

func register(ctx context.Context, kubelet, endpoint string) error {
	conn, err := grpc.NewClient("unix://"+kubelet, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = api.NewRegistrationClient(conn).Register(ctx, &api.RegisterRequest{
		Version:      api.Version,
		Endpoint:     endpoint,
		ResourceName: resourceName,
		Options:      &api.DevicePluginOptions{},
	})
	return err
}

func (p *plugin) GetDevicePluginOptions(context.Context, *api.Empty) (*api.DevicePluginOptions, error) {
	return &api.DevicePluginOptions{}, nil
}

// ListAndWatch sends the GPUs once, all healthy, and holds the stream open until the plugin
// stops: its end is how the kubelet learns that the plugin is gone.
func (p *plugin) ListAndWatch(_ *api.Empty, stream grpc.ServerStreamingServer[api.ListAndWatchResponse]) error {
	uuids := make([]string, 0, len(p.names))
	for uuid := range p.names {
		uuids = append(uuids, uuid)
	}
	sort.Strings(uuids)
	response := &api.ListAndWatchResponse{}
	for _, uuid := range uuids {
		response.Devices = append(response.Devices, &api.Device{ID: uuid, Health: api.Healthy})
	}
	if err := stream.Send(response); err != nil {
		return err
	}
	select {
	case <-p.stop:
	case <-stream.Context().Done():
	}
	return nil
}

func (p *plugin) Allocate(ctx context.Context, request *api.AllocateRequest) (*api.AllocateResponse, error) {
	response := &api.AllocateResponse{}
	for _, container := range request.ContainerRequests {
		env := map[string]string{"NVIDIA_VISIBLE_DEVICES": strings.Join(container.DevicesIds, ",")}
		for _, uuid := range container.DevicesIds {
			name, ok := p.names[uuid]
			if !ok {
				return nil, fmt.Errorf("no GPU %s on this node", uuid)
			}
			env["GPU2DRA_DEVICE_"+envName(name)] = uuid
		}
		klog.InfoS("allocated", "devices", container.DevicesIds)
		response.ContainerResponses = append(response.ContainerResponses, &api.ContainerAllocateResponse{Envs: env})
	}
	return response, nil
}

func (p *plugin) GetPreferredAllocation(context.Context, *api.PreferredAllocationRequest) (*api.PreferredAllocationResponse, error) {
	return &api.PreferredAllocationResponse{}, nil
}

func (p *plugin) PreStartContainer(context.Context, *api.PreStartContainerRequest) (*api.PreStartContainerResponse, error) {
	return &api.PreStartContainerResponse{}, nil
}

// envName is the DRA plugin's: upper case, '-' and '.' as '_'.
func envName(name string) string {
	return strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(name))
}
