package awslocal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// kubeletConfig is what a node's bootstrap hands the kubelet, read from the
// instance's user data the way the AMI's bootstrap reads it: nodeadm
// NodeConfig (AL2023), Bottlerocket settings TOML, or AL2's bootstrap.sh.
type kubeletConfig struct {
	Family         string
	ClusterName    string
	Labels         map[string]string
	Taints         []corev1.Taint
	MaxPods        *int64
	KubeReserved   map[string]string
	SystemReserved map[string]string
	EvictionHard   map[string]string
}

func newKubeletConfig(family string) *kubeletConfig {
	return &kubeletConfig{Family: family, Labels: map[string]string{}, KubeReserved: map[string]string{}, SystemReserved: map[string]string{}}
}

// familyOfImage is the bootstrap an image runs, from the names the front
// publishes; "" when the image is not one of them (then the user data's
// own shape decides).
func familyOfImage(name string) string {
	switch {
	case strings.HasPrefix(name, "amazon-eks-node-al2023-"):
		return FamilyAL2023
	case strings.HasPrefix(name, "amazon-eks-node-"), strings.HasPrefix(name, "amazon-eks-arm64-node-"), strings.HasPrefix(name, "amazon-eks-gpu-node-"):
		return FamilyAL2
	case strings.HasPrefix(name, "bottlerocket-"):
		return FamilyBottlerocket
	case strings.HasPrefix(name, "Windows_Server-"):
		return "windows"
	}
	return ""
}

// parseUserData reads the kubelet's configuration from user data for the
// image's family. An error means the kubelet would not start (or never be
// configured), so the instance never joins.
func parseUserData(family string, data []byte) (*kubeletConfig, error) {
	if family == "" {
		switch s := string(data); {
		case strings.Contains(s, "kind: NodeConfig"):
			family = FamilyAL2023
		case strings.Contains(s, "[settings.kubernetes"):
			family = FamilyBottlerocket
		case strings.Contains(s, "/etc/eks/bootstrap.sh"):
			family = FamilyAL2
		default:
			return nil, errors.New("the user data carries no node bootstrap (no NodeConfig, Bottlerocket settings or bootstrap.sh)")
		}
	}
	var cfg *kubeletConfig
	var err error
	switch family {
	case FamilyAL2023:
		cfg, err = parseNodeadm(data)
	case FamilyBottlerocket:
		cfg, err = parseBottlerocket(data)
	case FamilyAL2:
		cfg, err = parseBootstrapSh(data)
	default:
		return nil, fmt.Errorf("the local AWS does not boot %s nodes", family)
	}
	if err != nil {
		return nil, err
	}
	if err := checkNodeLabels(cfg.Labels); err != nil {
		return nil, err
	}
	return cfg, nil
}

// mimeParts are the parts of a MIME multipart user data with their content
// types; plain user data is one part of type "".
func mimeParts(data []byte) ([]mimePart, error) {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if !bytes.HasPrefix(trimmed, []byte("MIME-Version")) && !bytes.HasPrefix(trimmed, []byte("Content-Type")) {
		return []mimePart{{"", data}}, nil
	}
	msg, err := mail.ReadMessage(bytes.NewReader(trimmed))
	if err != nil {
		return nil, fmt.Errorf("reading MIME user data: %w", err)
	}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil {
		return nil, fmt.Errorf("MIME user data content type: %w", err)
	}
	if !strings.HasPrefix(mt, "multipart/") {
		b, err := io.ReadAll(msg.Body)
		return []mimePart{{mt, b}}, err
	}
	r := multipart.NewReader(msg.Body, params["boundary"])
	var parts []mimePart
	for {
		p, err := r.NextPart()
		if err == io.EOF {
			return parts, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading MIME part: %w", err)
		}
		b, err := io.ReadAll(p)
		if err != nil {
			return nil, fmt.Errorf("reading MIME part: %w", err)
		}
		ct, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
		parts = append(parts, mimePart{ct, b})
	}
}

type mimePart struct {
	ContentType string
	Body        []byte
}

type nodeConfig struct {
	Kind string `json:"kind"`
	Spec struct {
		Cluster struct {
			Name string `json:"name"`
		} `json:"cluster"`
		Kubelet struct {
			Config map[string]json.RawMessage `json:"config"`
			Flags  []string                   `json:"flags"`
		} `json:"kubelet"`
	} `json:"spec"`
}

// parseNodeadm merges every NodeConfig of the user data in order, as
// nodeadm does: later documents win for scalars, maps merge, flags append.
func parseNodeadm(data []byte) (*kubeletConfig, error) {
	parts, err := mimeParts(data)
	if err != nil {
		return nil, err
	}
	cfg := newKubeletConfig(FamilyAL2023)
	found := false
	for _, p := range parts {
		if p.ContentType != "application/node.eks.aws" && !(p.ContentType == "" && bytes.Contains(p.Body, []byte("kind: NodeConfig"))) {
			continue
		}
		for _, doc := range strings.Split(string(p.Body), "\n---") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var nc nodeConfig
			if err := yaml.Unmarshal([]byte(doc), &nc); err != nil {
				return nil, fmt.Errorf("nodeadm: parsing NodeConfig: %w", err)
			}
			if nc.Kind != "NodeConfig" {
				continue
			}
			found = true
			if nc.Spec.Cluster.Name != "" {
				cfg.ClusterName = nc.Spec.Cluster.Name
			}
			if err := cfg.applyKubeletConfig(nc.Spec.Kubelet.Config); err != nil {
				return nil, fmt.Errorf("nodeadm: %w", err)
			}
			if err := cfg.applyFlags(nc.Spec.Kubelet.Flags); err != nil {
				return nil, fmt.Errorf("nodeadm: %w", err)
			}
		}
	}
	if !found {
		return nil, errors.New("nodeadm: no NodeConfig in the user data")
	}
	return cfg, nil
}

func (cfg *kubeletConfig) applyKubeletConfig(c map[string]json.RawMessage) error {
	if raw, ok := c["maxPods"]; ok {
		var n int64
		if err := json.Unmarshal(raw, &n); err != nil {
			return fmt.Errorf("kubelet config maxPods: %w", err)
		}
		cfg.MaxPods = &n
	}
	for key, into := range map[string]*map[string]string{"kubeReserved": &cfg.KubeReserved, "systemReserved": &cfg.SystemReserved, "evictionHard": &cfg.EvictionHard} {
		raw, ok := c[key]
		if !ok {
			continue
		}
		var m map[string]string
		if err := json.Unmarshal(raw, &m); err != nil {
			return fmt.Errorf("kubelet config %s: %w", key, err)
		}
		if *into == nil {
			*into = map[string]string{}
		}
		for k, v := range m {
			(*into)[k] = v
		}
	}
	if raw, ok := c["registerWithTaints"]; ok {
		var ts []corev1.Taint
		if err := json.Unmarshal(raw, &ts); err != nil {
			return fmt.Errorf("kubelet config registerWithTaints: %w", err)
		}
		cfg.Taints = append(cfg.Taints, ts...)
	}
	return nil
}

// applyFlags reads the kubelet flags the local AWS understands; others
// pass as a kubelet would accept them.
func (cfg *kubeletConfig) applyFlags(flags []string) error {
	for i := 0; i < len(flags); i++ {
		name, value, hasValue := strings.Cut(strings.TrimLeft(flags[i], "-"), "=")
		if !strings.HasPrefix(flags[i], "--") {
			continue
		}
		switch name {
		case "node-labels", "register-with-taints", "max-pods", "kube-reserved", "system-reserved", "eviction-hard":
			if !hasValue {
				if i+1 >= len(flags) {
					return fmt.Errorf("flag --%s needs a value", name)
				}
				i++
				value = flags[i]
			}
		default:
			continue
		}
		// nodeadm hands its flags to the kubelet through a systemd unit,
		// and systemd drops one level of quoting: Karpenter's AL2023 user
		// data writes --node-labels="a=b,c=d".
		value = unquote(value)
		switch name {
		case "node-labels":
			for _, kv := range splitList(value) {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return fmt.Errorf("--node-labels: %q is not key=value", kv)
				}
				cfg.Labels[k] = v
			}
		case "register-with-taints":
			for _, s := range splitList(value) {
				t, err := parseTaint(s)
				if err != nil {
					return fmt.Errorf("--register-with-taints: %w", err)
				}
				cfg.Taints = append(cfg.Taints, t)
			}
		case "max-pods":
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				return fmt.Errorf("--max-pods %q: %w", value, err)
			}
			cfg.MaxPods = &n
		case "kube-reserved", "system-reserved":
			into := cfg.KubeReserved
			if name == "system-reserved" {
				into = cfg.SystemReserved
			}
			for _, kv := range splitList(value) {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return fmt.Errorf("--%s: %q is not resource=quantity", name, kv)
				}
				into[k] = v
			}
		case "eviction-hard":
			if cfg.EvictionHard == nil {
				cfg.EvictionHard = map[string]string{}
			}
			for _, kv := range splitList(value) {
				k, v, ok := strings.Cut(kv, "<")
				if !ok {
					return fmt.Errorf("--eviction-hard: %q is not signal<quantity", kv)
				}
				cfg.EvictionHard[k] = v
			}
		}
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// parseTaint reads key[=value]:Effect as the kubelet's flag does.
func parseTaint(s string) (corev1.Taint, error) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok {
		return corev1.Taint{}, fmt.Errorf("taint %q has no effect", s)
	}
	t := corev1.Taint{Effect: corev1.TaintEffect(effect)}
	t.Key, t.Value, _ = strings.Cut(kv, "=")
	switch t.Effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return corev1.Taint{}, fmt.Errorf("taint %q: effect %q is not NoSchedule, PreferNoSchedule or NoExecute", s, effect)
	}
	if t.Key == "" {
		return corev1.Taint{}, fmt.Errorf("taint %q has no key", s)
	}
	return t, nil
}

// parseBottlerocket reads [settings.kubernetes] from the TOML user data.
func parseBottlerocket(data []byte) (*kubeletConfig, error) {
	doc, err := parseTOML(data)
	if err != nil {
		return nil, fmt.Errorf("bottlerocket: %w", err)
	}
	settings, _ := doc["settings"].(map[string]any)
	k8s, ok := settings["kubernetes"].(map[string]any)
	if !ok {
		return nil, errors.New("bottlerocket: no [settings.kubernetes] in the user data")
	}
	cfg := newKubeletConfig(FamilyBottlerocket)
	cfg.ClusterName, _ = k8s["cluster-name"].(string)
	if v, ok := k8s["max-pods"]; ok {
		n, ok := v.(int64)
		if !ok {
			return nil, fmt.Errorf("bottlerocket: max-pods %v is not an integer", v)
		}
		cfg.MaxPods = &n
	}
	strMap := func(key string) (map[string]string, error) {
		out := map[string]string{}
		m, ok := k8s[key].(map[string]any)
		if !ok {
			if _, present := k8s[key]; present {
				return nil, fmt.Errorf("bottlerocket: %s is not a table", key)
			}
			return out, nil
		}
		for k, v := range m {
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("bottlerocket: %s.%s is not a string", key, k)
			}
			out[k] = s
		}
		return out, nil
	}
	if cfg.Labels, err = strMap("node-labels"); err != nil {
		return nil, err
	}
	if cfg.KubeReserved, err = strMap("kube-reserved"); err != nil {
		return nil, err
	}
	if cfg.SystemReserved, err = strMap("system-reserved"); err != nil {
		return nil, err
	}
	if _, ok := k8s["eviction-hard"]; ok {
		if cfg.EvictionHard, err = strMap("eviction-hard"); err != nil {
			return nil, err
		}
	}
	if taints, ok := k8s["node-taints"].(map[string]any); ok {
		keys := make([]string, 0, len(taints))
		for k := range taints {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			var values []string
			switch v := taints[k].(type) {
			case string:
				values = []string{v}
			case []any:
				for _, e := range v {
					s, ok := e.(string)
					if !ok {
						return nil, fmt.Errorf("bottlerocket: node-taints.%s holds a non-string", k)
					}
					values = append(values, s)
				}
			default:
				return nil, fmt.Errorf("bottlerocket: node-taints.%s is neither a string nor a list", k)
			}
			for _, v := range values {
				t, err := parseTaint(k + "=" + v)
				if err != nil {
					return nil, fmt.Errorf("bottlerocket: node-taints: %w", err)
				}
				cfg.Taints = append(cfg.Taints, t)
			}
		}
	}
	return cfg, nil
}

// parseBootstrapSh finds the /etc/eks/bootstrap.sh call in the user data's
// shell script(s) and reads its --kubelet-extra-args.
func parseBootstrapSh(data []byte) (*kubeletConfig, error) {
	parts, err := mimeParts(data)
	if err != nil {
		return nil, err
	}
	cfg := newKubeletConfig(FamilyAL2)
	found := false
	for _, p := range parts {
		if p.ContentType != "" && p.ContentType != "text/x-shellscript" {
			continue
		}
		script := strings.ReplaceAll(string(p.Body), "\\\n", " ")
		sc := bufio.NewScanner(strings.NewReader(script))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			i := strings.Index(line, "/etc/eks/bootstrap.sh")
			if i < 0 || strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			args, err := shellWords(line[i+len("/etc/eks/bootstrap.sh"):])
			if err != nil {
				return nil, fmt.Errorf("bootstrap.sh: %w", err)
			}
			found = true
			for j := 0; j < len(args); j++ {
				a := args[j]
				if !strings.HasPrefix(a, "--") {
					if cfg.ClusterName == "" {
						cfg.ClusterName = a
					}
					continue
				}
				name, value, has := strings.Cut(a, "=")
				if !has && j+1 < len(args) {
					j++
					value = args[j]
				}
				if name == "--kubelet-extra-args" {
					flags, err := shellWords(value)
					if err != nil {
						return nil, fmt.Errorf("bootstrap.sh --kubelet-extra-args: %w", err)
					}
					if err := cfg.applyFlags(flags); err != nil {
						return nil, fmt.Errorf("bootstrap.sh: %w", err)
					}
				}
			}
		}
	}
	if !found {
		return nil, errors.New("no /etc/eks/bootstrap.sh call in the user data")
	}
	return cfg, nil
}

// shellWords splits a command line with single and double quotes and
// backslash escapes, as sh would (no expansions).
func shellWords(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case ch == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("unterminated double quote")
			}
			inWord = true
		case ch == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		case ch == ';' || ch == '&' || ch == '|':
			if inWord {
				out = append(out, cur.String())
			}
			return out, nil
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out, nil
}

// kubeletLabels are the kubernetes.io / k8s.io labels the kubelet lets
// --node-labels set; any other label in those namespaces makes it refuse
// to start.
var kubeletLabels = map[string]bool{
	"kubernetes.io/hostname": true, "kubernetes.io/instance-type": true, "kubernetes.io/os": true, "kubernetes.io/arch": true,
	"beta.kubernetes.io/instance-type": true, "beta.kubernetes.io/os": true, "beta.kubernetes.io/arch": true,
	"failure-domain.beta.kubernetes.io/zone": true, "failure-domain.beta.kubernetes.io/region": true,
	"topology.kubernetes.io/zone": true, "topology.kubernetes.io/region": true, "node.kubernetes.io/instance-type": true,
}

func checkNodeLabels(labels map[string]string) error {
	var bad []string
	for k := range labels {
		domain, _, ok := strings.Cut(k, "/")
		if !ok || kubeletLabels[k] {
			continue
		}
		restricted := domain == "kubernetes.io" || strings.HasSuffix(domain, ".kubernetes.io") || domain == "k8s.io" || strings.HasSuffix(domain, ".k8s.io")
		allowedNS := domain == "kubelet.kubernetes.io" || strings.HasSuffix(domain, ".kubelet.kubernetes.io") ||
			domain == "node.kubernetes.io" || strings.HasSuffix(domain, ".node.kubernetes.io")
		if restricted && !allowedNS {
			bad = append(bad, k)
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("kubelet: unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: %v", bad)
	}
	return nil
}

// unquote removes one pair of matching surrounding quotes, as systemd does
// with an ExecStart argument.
func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}
