package bootstrap

import (
	"context"
	"fmt"
	"strconv"

	"github.com/pelletier/go-toml/v2"
)

// MountInstanceStorageCommand is the bootstrap command that sets up RAID0
// instance storage on Bottlerocket.
const MountInstanceStorageCommand = "000-mount-instance-storage"

// bottlerocket merges the settings Karpenter owns into the user's TOML:
// everything the user wrote stays, except that the cluster, node labels
// (merged, ours winning), node taints (ours only) and the kubelet settings
// of spec.kubelet are overwritten.
func (o resolved) bottlerocket(_ context.Context) (string, error) {
	doc := map[string]any{}
	if custom := o.customUserData(); custom != "" {
		if err := toml.Unmarshal([]byte(custom), &doc); err != nil {
			return "", fmt.Errorf("invalid UserData: parsing Bottlerocket TOML: %w", err)
		}
	}
	settings, err := subTable(doc, "settings")
	if err != nil {
		return "", err
	}
	k8s, err := subTable(settings, "kubernetes")
	if err != nil {
		return "", err
	}
	if autoscaling, ok := settings["autoscaling"].(map[string]any); ok {
		// Karpenter nodes join no Auto Scaling group; waiting for one
		// would keep the kubelet from ever starting.
		if _, ok := autoscaling["should-wait"]; ok {
			autoscaling["should-wait"] = false
		}
	}

	k8s["cluster-name"] = o.ClusterName
	k8s["api-server"] = o.ClusterEndpoint
	if o.CABundle != "" {
		k8s["cluster-certificate"] = o.CABundle
	}
	labels, err := subTable(k8s, "node-labels")
	if err != nil {
		return "", err
	}
	for _, l := range o.labels {
		labels[l.key] = l.value
	}
	if len(labels) == 0 {
		delete(k8s, "node-labels")
	}
	delete(k8s, "node-taints")
	if len(o.taints) > 0 {
		taints := map[string]any{}
		for _, t := range o.taints {
			prev, _ := taints[t.Key].([]string)
			taints[t.Key] = append(prev, fmt.Sprintf("%s:%s", t.Value, t.Effect))
		}
		k8s["node-taints"] = taints
	}

	kc := o.kubelet
	if kc.MaxPods != nil {
		k8s["max-pods"] = int64(*kc.MaxPods)
	}
	switch len(kc.ClusterDNS) {
	case 0:
	case 1:
		k8s["cluster-dns-ip"] = kc.ClusterDNS[0]
	default:
		k8s["cluster-dns-ip"] = kc.ClusterDNS
	}
	for key, m := range map[string]map[string]string{
		"system-reserved":            kc.SystemReserved,
		"kube-reserved":              kc.KubeReserved,
		"eviction-hard":              kc.EvictionHard,
		"eviction-soft":              kc.EvictionSoft,
		"eviction-soft-grace-period": kc.EvictionSoftGracePeriod,
	} {
		if m != nil {
			k8s[key] = m
		}
	}
	if kc.EvictionMaxPodGracePeriod != nil {
		k8s["eviction-max-pod-grace-period"] = int64(*kc.EvictionMaxPodGracePeriod)
	}
	// Bottlerocket models the image GC thresholds as strings.
	if kc.ImageGCHighThreshold != nil {
		k8s["image-gc-high-threshold-percent"] = strconv.Itoa(int(*kc.ImageGCHighThreshold))
	}
	if kc.ImageGCLowThreshold != nil {
		k8s["image-gc-low-threshold-percent"] = strconv.Itoa(int(*kc.ImageGCLowThreshold))
	}
	if kc.CPUCFSQuota != nil {
		k8s["cpu-cfs-quota-enforced"] = *kc.CPUCFSQuota
	}

	if o.raid0() {
		commands, err := subTable(settings, "bootstrap-commands")
		if err != nil {
			return "", err
		}
		bind := []string{"apiclient", "ephemeral-storage", "bind"}
		if !o.BottlerocketDefaultMountPaths {
			bind = append(bind, "--dirs", "/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods")
		}
		commands[MountInstanceStorageCommand] = map[string]any{
			"commands":  [][]string{{"apiclient", "ephemeral-storage", "init"}, bind},
			"mode":      "always",
			"essential": true,
		}
	}
	out, err := toml.Marshal(doc)
	if err != nil {
		return "", fmt.Errorf("encoding Bottlerocket TOML: %w", err)
	}
	return string(out), nil
}

// subTable returns table[key] as a table, creating it when absent.
func subTable(table map[string]any, key string) (map[string]any, error) {
	switch v := table[key].(type) {
	case nil:
		m := map[string]any{}
		table[key] = m
		return m, nil
	case map[string]any:
		return v, nil
	default:
		return nil, fmt.Errorf("invalid UserData: %s is a %T, not a table", key, v)
	}
}
