package bootstrap

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"sigs.k8s.io/yaml"
)

// NodeConfig API of nodeadm, the AL2023 node agent.
const (
	NodeConfigAPIVersion = "node.eks.aws/v1alpha1"
	NodeConfigKind       = "NodeConfig"
	// LocalStorageRAID0 is nodeadm's instance-store strategy for RAID0.
	LocalStorageRAID0 = "RAID0"
	// nodeConfigComment heads the NodeConfig Karpenter generates.
	nodeConfigComment = "# Karpenter Generated NodeConfig\n"
)

// NodeConfig is the part of nodeadm's NodeConfig Karpenter writes. Field
// order does not matter: YAML keys come out sorted, as upstream's do.
type NodeConfig struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Metadata   nodeConfigMetadata `json:"metadata"`
	Spec       NodeConfigSpec     `json:"spec"`
}

// nodeConfigMetadata renders "creationTimestamp: null" like the ObjectMeta
// upstream's NodeConfig type embeds; nodeadm ignores it.
type nodeConfigMetadata struct {
	CreationTimestamp *string `json:"creationTimestamp"`
}

// NodeConfigSpec is spec of a NodeConfig.
type NodeConfigSpec struct {
	Cluster    ClusterDetails  `json:"cluster"`
	Containerd struct{}        `json:"containerd"`
	Instance   InstanceOptions `json:"instance"`
	Kubelet    KubeletOptions  `json:"kubelet"`
}

// ClusterDetails say which cluster the node joins.
type ClusterDetails struct {
	Name                 string `json:"name,omitempty"`
	APIServerEndpoint    string `json:"apiServerEndpoint,omitempty"`
	CertificateAuthority []byte `json:"certificateAuthority,omitempty"`
	CIDR                 string `json:"cidr,omitempty"`
}

// InstanceOptions configure the instance (here: its local disks).
type InstanceOptions struct {
	LocalStorage LocalStorageOptions `json:"localStorage"`
}

// LocalStorageOptions choose how instance-store disks are used.
type LocalStorageOptions struct {
	Strategy string `json:"strategy,omitempty"`
}

// KubeletOptions are inline kubelet configuration and extra flags.
type KubeletOptions struct {
	Config map[string]json.RawMessage `json:"config,omitempty"`
	Flags  []string                   `json:"flags,omitempty"`
}

// nodeadm renders Karpenter's NodeConfig as the last part of a MIME
// multipart document, after the user's parts: nodeadm merges NodeConfigs
// in document order, later ones winning, so the cluster, labels and taints
// Karpenter launched for cannot be overridden by user data.
func (o resolved) nodeadm() (string, error) {
	ours, err := o.nodeConfigYAML()
	if err != nil {
		return "", err
	}
	var parts []Part
	if custom := o.customUserData(); custom != "" {
		if parts, err = nodeadmUserParts(custom); err != nil {
			return "", err
		}
	}
	return WriteMIME(append(parts, newPart(ContentTypeNodeConfig, ours)))
}

// nodeadmUserParts reads the user's data: a MIME document keeps its parts;
// anything else that parses as a YAML object is taken for a NodeConfig,
// the rest for a shell script (upstream's detection).
func nodeadmUserParts(custom string) ([]Part, error) {
	if IsMIME(custom) {
		parts, err := ParseMIME(custom)
		if err != nil {
			return nil, fmt.Errorf("parsing custom user data: %w", err)
		}
		return parts, nil
	}
	if err := yaml.Unmarshal([]byte(custom), &map[string]any{}); err == nil {
		return []Part{newPart(ContentTypeNodeConfig, custom)}, nil
	}
	return []Part{newPart(ContentTypeShellScript, custom)}, nil
}

func (o resolved) nodeConfigYAML() (string, error) {
	if o.ClusterCIDR == "" {
		// Without it nodeadm cannot configure the kubelet's cluster DNS
		// and service routing; upstream refuses to launch too.
		return "", errors.New("resolving cluster CIDR: AL2023 needs the cluster's service CIDR for nodeadm")
	}
	nc := NodeConfig{
		APIVersion: NodeConfigAPIVersion,
		Kind:       NodeConfigKind,
		Spec: NodeConfigSpec{Cluster: ClusterDetails{
			Name:              o.ClusterName,
			APIServerEndpoint: o.ClusterEndpoint,
			CIDR:              o.ClusterCIDR,
		}},
	}
	if o.CABundle != "" {
		ca, err := base64.StdEncoding.DecodeString(o.CABundle)
		if err != nil {
			return "", fmt.Errorf("decoding the cluster CA bundle: %w", err)
		}
		nc.Spec.Cluster.CertificateAuthority = ca
	}
	if o.raid0() {
		nc.Spec.Instance.LocalStorage.Strategy = LocalStorageRAID0
	}
	// AL2023 takes the class's kubelet map as is: any KubeletConfiguration
	// field works, not only those Karpenter knows.
	config := make(map[string]json.RawMessage, len(o.Kubelet)+1)
	for k, v := range o.Kubelet {
		if len(v.Raw) > 0 {
			config[k] = json.RawMessage(v.Raw)
		}
	}
	if len(o.taints) > 0 {
		raw, err := json.Marshal(o.taints)
		if err != nil {
			return "", fmt.Errorf("encoding taints: %w", err)
		}
		config["registerWithTaints"] = raw
	}
	if len(config) > 0 {
		nc.Spec.Kubelet.Config = config
	}
	if arg := o.nodeLabelArg(); arg != "" {
		nc.Spec.Kubelet.Flags = []string{arg}
	}
	out, err := yaml.Marshal(nc)
	if err != nil {
		return "", fmt.Errorf("encoding NodeConfig: %w", err)
	}
	return nodeConfigComment + string(out), nil
}
