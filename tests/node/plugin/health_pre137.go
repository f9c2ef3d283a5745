//go:build k8s_pre137

package main

import "k8s.io/dynamic-resource-allocation/kubeletplugin"

// Before v0.37 the helper offers device health only to plugins implementing its v1alpha1
// service, which this fake does not (see health.go).
var releaseOptions []kubeletplugin.Option
