// Karpenter's kwok provider (its kwok/main.go, unchanged but for one step) whose GPU instance
// types predict their DRA devices: each instance type that offers nvidia.com/gpu gets, in
// InstanceType.DynamicResources.ResourceSliceTemplates, one gpu.nvidia.com slice of the devices
// that KWOK_DRA_DEVICES_FILE (a JSON object: instance-type name -> resource.k8s.io/v1 Devices)
// lists for it; the devices NVIDIA's DRA driver would publish on such a node. What a cloud
// provider that "predicts devices" does; with --ignore-dra-requests=false, Karpenter then adds
// nodes for pods with claims. Built by tests/karpenter/build.sh as karpenter-dra.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"unique"

	"github.com/samber/lo"
	resourcev1 "k8s.io/api/resource/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kwok "sigs.k8s.io/karpenter/kwok/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/overlay"
	"sigs.k8s.io/karpenter/pkg/controllers"
	"sigs.k8s.io/karpenter/pkg/controllers/node/health"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/operator"
)

const driver = "gpu.nvidia.com"

// withDevices fills the templates of every instance type that offers nvidia.com/gpu.
func withDevices(instanceTypes []*cloudprovider.InstanceType, path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var devices map[string][]resourcev1.Device
	if err := json.Unmarshal(raw, &devices); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for _, it := range instanceTypes {
		gpus, ok := it.Capacity["nvidia.com/gpu"]
		if !ok || gpus.IsZero() {
			continue
		}
		listed, ok := devices[it.Name]
		if !ok {
			return fmt.Errorf("%s lists no devices for GPU instance type %s", path, it.Name)
		}
		template := &cloudprovider.ResourceSliceTemplate{
			Driver: unique.Make(driver),
			Pool:   cloudprovider.ResourcePool{Name: unique.Make(it.Name)},
		}
		for _, d := range listed {
			template.Devices = append(template.Devices, cloudprovider.Device{
				Name:       unique.Make(d.Name),
				Attributes: d.Attributes,
				Capacity:   d.Capacity,
			})
		}
		it.DynamicResources.ResourceSliceTemplates = []*cloudprovider.ResourceSliceTemplate{template}
	}
	return nil
}

func main() {
	ctx, op := operator.NewOperator()
	instanceTypes, err := kwok.ConstructInstanceTypes(ctx)
	if err != nil {
		log.FromContext(ctx).Error(err, "failed constructing instance types")
	}
	if path := os.Getenv("KWOK_DRA_DEVICES_FILE"); path != "" {
		if err := withDevices(instanceTypes, path); err != nil {
			log.FromContext(ctx).Error(err, "failed reading DRA devices")
			os.Exit(1)
		}
	}

	overlayUndecoratedCloudProvider := kwok.NewCloudProvider(ctx, op.GetClient(), instanceTypes)
	cloudProvider := overlay.Decorate(overlayUndecoratedCloudProvider, op.GetClient(), op.InstanceTypeStore)
	repairPolicyMatcher := lo.Must(health.NewRepairPolicyMatcher(ctx, cloudProvider))
	clusterState := state.NewCluster(op.Clock, op.GetClient(), cloudProvider, state.WithRepairPolicyMatcher(repairPolicyMatcher))
	op.
		WithControllers(ctx, controllers.NewControllers(
			ctx,
			op.Manager,
			op.Clock,
			op.GetClient(),
			op.EventRecorder,
			cloudProvider,
			overlayUndecoratedCloudProvider,
			clusterState,
			op.InstanceTypeStore,
			op.PredictionStore,
		)...).Start(ctx)
}
