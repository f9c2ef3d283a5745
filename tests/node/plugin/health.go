//go:build !k8s_pre137

package main

import (
	"context"

	"k8s.io/dynamic-resource-allocation/kubeletplugin"
)

// k8s.io/dynamic-resource-allocation v0.37 added DRAPlugin.WatchHealthStatus and the
// HealthService option; build.sh sets the k8s_pre137 tag for older releases (health_pre137.go).
// This fake has no device health to report, so the kubelet is not offered the service.
var releaseOptions = []kubeletplugin.Option{kubeletplugin.HealthService(false)}

// WatchHealthStatus is never called with the health service off.
func (p *plugin) WatchHealthStatus(context.Context, chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}
