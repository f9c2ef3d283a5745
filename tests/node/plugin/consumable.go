package main

import (
	"fmt"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// consumableShares publishes the devices as the NVIDIA driver does with
// --consumable-shares=<option> (its ConsumableShares gate, cmd/gpu-kubelet-plugin/
// consumable_shares.go): every device allows multiple allocations; a device with a memory
// capacity gets it consumable in 1Mi steps up to the memory rounded down to 1Mi, a claim
// taking the whole of it by default with "memory" and none otherwise; a number N adds the
// capacity "shares" N, a claim taking 1 by default and from 1 to N. "" or "disabled" leaves
// the devices exclusive.
func consumableShares(devices []resourceapi.Device, option string) ([]resourceapi.Device, error) {
	option = strings.TrimSpace(option)
	if option == "" || option == "disabled" {
		return devices, nil
	}
	shares, err := strconv.Atoi(option)
	if option != "memory" && option != "unlimited" && (err != nil || shares < 1) {
		return nil, fmt.Errorf("--consumable-shares: %q is not memory, unlimited or a number above 0", option)
	}
	out := make([]resourceapi.Device, 0, len(devices))
	for _, device := range devices {
		device = *device.DeepCopy()
		device.AllowMultipleAllocations = &[]bool{true}[0]
		memory, ok := device.Capacity["memory"]
		if !ok {
			out = append(out, device)
			continue
		}
		step := resource.MustParse("1Mi")
		whole := *resource.NewQuantity(memory.Value.Value()/step.Value()*step.Value(), resource.BinarySI)
		low, byDefault := resource.MustParse("0"), resource.MustParse("0")
		if option == "memory" {
			low, byDefault = step.DeepCopy(), whole.DeepCopy()
		}
		device.Capacity["memory"] = resourceapi.DeviceCapacity{
			Value: whole,
			RequestPolicy: &resourceapi.CapacityRequestPolicy{
				Default:    &byDefault,
				ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: &low, Max: quantity(whole), Step: quantity(step)},
			},
		}
		if shares > 0 {
			one, total := resource.MustParse("1"), *resource.NewQuantity(int64(shares), resource.DecimalSI)
			device.Capacity["shares"] = resourceapi.DeviceCapacity{
				Value: total,
				RequestPolicy: &resourceapi.CapacityRequestPolicy{
					Default:    quantity(one),
					ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: quantity(one), Max: quantity(total), Step: quantity(one)},
				},
			}
		}
		out = append(out, device)
	}
	return out, nil
}

func quantity(q resource.Quantity) *resource.Quantity {
	return &q
}
