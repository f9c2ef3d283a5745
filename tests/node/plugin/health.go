//go:build !k8s_pre137

package main

import (
	"context"

	"k8s.io/dynamic-resource-allocation/kubeletplugin"
)

// WatchHealthStatus: this fake reports no device health (k8s.io/dynamic-resource-allocation
// v0.37 added the method to DRAPlugin; build.sh sets the k8s_pre137 tag for older releases).
func (p *plugin) WatchHealthStatus(context.Context, chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}
