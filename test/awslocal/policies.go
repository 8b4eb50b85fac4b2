package awslocal

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

//go:embed testdata/policies/upstream-controller.json
var upstreamControllerPolicies []byte

// AccountID is the account every resource of the local AWS belongs to
// (moto's default account).
const AccountID = "123456789012"

// PolicyVars are the values of the variables in the policy documents, named
// as CloudFormation names them: ${AWS::Partition}, ${AWS::Region},
// ${AWS::AccountId}, ${ClusterName}, ${KarpenterNodeRole.Arn},
// ${KarpenterInterruptionQueue.Arn}, and whatever Extra adds (a template's
// other parameters and resource attributes, "Logical.Attribute").
type PolicyVars struct {
	Partition   string
	Region      string
	AccountID   string
	ClusterName string
	// NodeRole is the node role's name (KarpenterNodeRole-<cluster> when
	// empty).
	NodeRole string
	// QueueName is the interruption queue's name (the cluster name when
	// empty, as upstream's template names it).
	QueueName string
	Extra     map[string]string
}

// values is the variable table, defaults filled in.
func (v PolicyVars) values() map[string]string {
	if v.Partition == "" {
		v.Partition = "aws"
	}
	if v.Region == "" {
		v.Region = DefaultRegion
	}
	if v.AccountID == "" {
		v.AccountID = AccountID
	}
	if v.NodeRole == "" {
		v.NodeRole = "KarpenterNodeRole-" + v.ClusterName
	}
	if v.QueueName == "" {
		v.QueueName = v.ClusterName
	}
	out := map[string]string{
		"AWS::Partition": v.Partition,
		"AWS::Region":    v.Region,
		"AWS::AccountId": v.AccountID,
		"AWS::URLSuffix": "amazonaws.com",
		"ClusterName":    v.ClusterName,

		"KarpenterNodeRole":              v.NodeRole,
		"KarpenterNodeRole.Arn":          fmt.Sprintf("arn:%s:iam::%s:role/%s", v.Partition, v.AccountID, v.NodeRole),
		"KarpenterInterruptionQueue":     fmt.Sprintf("https://sqs.%s.amazonaws.com/%s/%s", v.Region, v.AccountID, v.QueueName),
		"KarpenterInterruptionQueue.Arn": fmt.Sprintf("arn:%s:sqs:%s:%s:%s", v.Partition, v.Region, v.AccountID, v.QueueName),
	}
	for k, x := range v.Extra {
		out[k] = x
	}
	return out
}

var subVarRE = regexp.MustCompile(`\$\{([^}!]+)\}`)

// substitute replaces ${Name} with its value, as Fn::Sub does; ${!Name} is
// the literal ${Name}. An unknown name is an error.
func substitute(s string, vars map[string]string) (string, error) {
	var missing []string
	out := subVarRE.ReplaceAllStringFunc(s, func(m string) string {
		name := strings.TrimSpace(m[2 : len(m)-1])
		if v, ok := vars[name]; ok {
			return v
		}
		missing = append(missing, name)
		return m
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("unknown variable(s) %s in %q", strings.Join(missing, ", "), s)
	}
	return strings.ReplaceAll(out, "${!", "${"), nil
}

// UpstreamControllerPolicies are upstream Karpenter's controller policies
// (its getting-started template's six managed policies), from this
// package's test data, with the variables set.
func UpstreamControllerPolicies(vars PolicyVars) ([]Policy, error) {
	var doc struct {
		Policies []struct {
			Name     string          `json:"name"`
			Document json.RawMessage `json:"document"`
		} `json:"policies"`
	}
	if err := json.Unmarshal(upstreamControllerPolicies, &doc); err != nil {
		return nil, fmt.Errorf("reading upstream's controller policies: %w", err)
	}
	values := vars.values()
	var out []Policy
	for _, p := range doc.Policies {
		name, err := substitute(p.Name, values)
		if err != nil {
			return nil, err
		}
		text, err := substitute(string(p.Document), values)
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", name, err)
		}
		pol, err := ParsePolicy(name, []byte(text))
		if err != nil {
			return nil, err
		}
		out = append(out, pol)
	}
	return out, nil
}

// CloudFormationPolicies reads the IAM policies a CloudFormation template
// (YAML or JSON) creates: the PolicyDocument of every AWS::IAM::ManagedPolicy
// and AWS::IAM::Policy resource, in logical-id order, named by their
// ManagedPolicyName/PolicyName (else the logical id). Fn::Sub, Ref,
// Fn::GetAtt and Fn::Join (long or short form) are resolved from vars and the
// template's parameter defaults.
func CloudFormationPolicies(template []byte, vars PolicyVars) ([]Policy, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(template, &root); err != nil {
		return nil, fmt.Errorf("reading the CloudFormation template: %w", err)
	}
	if len(root.Content) == 0 {
		return nil, fmt.Errorf("reading the CloudFormation template: empty")
	}
	top := root.Content[0]
	values := vars.values()
	// Parameter defaults fill what vars leaves out.
	if params := mapGet(top, "Parameters"); params != nil {
		for i := 0; i+1 < len(params.Content); i += 2 {
			name := params.Content[i].Value
			if _, ok := values[name]; ok {
				continue
			}
			if d := mapGet(params.Content[i+1], "Default"); d != nil && d.Kind == yaml.ScalarNode {
				values[name] = d.Value
			}
		}
	}
	resources := mapGet(top, "Resources")
	if resources == nil {
		return nil, fmt.Errorf("reading the CloudFormation template: no Resources")
	}
	if err := resourceAttributes(resources, values, vars); err != nil {
		return nil, err
	}
	type found struct {
		id  string
		pol Policy
	}
	var all []found
	for i := 0; i+1 < len(resources.Content); i += 2 {
		id, res := resources.Content[i].Value, resources.Content[i+1]
		typ := mapGet(res, "Type")
		if typ == nil || (typ.Value != "AWS::IAM::ManagedPolicy" && typ.Value != "AWS::IAM::Policy") {
			continue
		}
		props := mapGet(res, "Properties")
		docNode := mapGet(props, "PolicyDocument")
		if docNode == nil {
			return nil, fmt.Errorf("resource %s: no PolicyDocument", id)
		}
		name := id
		for _, key := range []string{"ManagedPolicyName", "PolicyName"} {
			if n := mapGet(props, key); n != nil {
				v, err := cfnResolve(n, values)
				if err != nil {
					return nil, fmt.Errorf("resource %s: %s: %w", id, key, err)
				}
				if s, ok := v.(string); ok {
					name = s
				}
			}
		}
		doc, err := cfnResolve(docNode, values)
		if err != nil {
			return nil, fmt.Errorf("resource %s: %w", id, err)
		}
		// A document may be a map or (through Fn::Sub) JSON text.
		text, isText := doc.(string)
		if !isText {
			b, err := json.Marshal(doc)
			if err != nil {
				return nil, fmt.Errorf("resource %s: %w", id, err)
			}
			text = string(b)
		}
		pol, err := ParsePolicy(name, []byte(text))
		if err != nil {
			return nil, err
		}
		all = append(all, found{id, pol})
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("the CloudFormation template creates no IAM policy")
	}
	sort.Slice(all, func(i, j int) bool { return all[i].id < all[j].id })
	out := make([]Policy, len(all))
	for i, f := range all {
		out[i] = f.pol
	}
	return out, nil
}

// resourceAttributes adds what Ref and Fn::GetAtt return for the
// template's roles, queues, instance profiles and managed policies (names
// from their properties, else the logical id); vars.Extra still wins.
func resourceAttributes(resources *yaml.Node, values map[string]string, vars PolicyVars) error {
	partition, region, account := values["AWS::Partition"], values["AWS::Region"], values["AWS::AccountId"]
	prop := func(res *yaml.Node, key, fallback string) (string, error) {
		n := mapGet(mapGet(res, "Properties"), key)
		if n == nil {
			return fallback, nil
		}
		v, err := cfnResolve(n, values)
		if err != nil {
			return "", err
		}
		return fmt.Sprint(v), nil
	}
	for i := 0; i+1 < len(resources.Content); i += 2 {
		id, res := resources.Content[i].Value, resources.Content[i+1]
		typ := mapGet(res, "Type")
		if typ == nil {
			continue
		}
		var err error
		var name, path string
		switch typ.Value {
		case "AWS::IAM::Role", "AWS::IAM::InstanceProfile", "AWS::IAM::ManagedPolicy":
			key := map[string]string{"AWS::IAM::Role": "RoleName", "AWS::IAM::InstanceProfile": "InstanceProfileName", "AWS::IAM::ManagedPolicy": "ManagedPolicyName"}[typ.Value]
			if name, err = prop(res, key, id); err != nil {
				return fmt.Errorf("resource %s: %w", id, err)
			}
			if path, err = prop(res, "Path", "/"); err != nil {
				return fmt.Errorf("resource %s: %w", id, err)
			}
			kind := map[string]string{"AWS::IAM::Role": "role", "AWS::IAM::InstanceProfile": "instance-profile", "AWS::IAM::ManagedPolicy": "policy"}[typ.Value]
			arn := fmt.Sprintf("arn:%s:iam::%s:%s%s%s", partition, account, kind, path, name)
			values[id+".Arn"] = arn
			values[id] = name
			if typ.Value == "AWS::IAM::ManagedPolicy" {
				values[id] = arn
			}
		case "AWS::SQS::Queue":
			if name, err = prop(res, "QueueName", id); err != nil {
				return fmt.Errorf("resource %s: %w", id, err)
			}
			u := fmt.Sprintf("https://sqs.%s.amazonaws.com/%s/%s", region, account, name)
			values[id], values[id+".QueueUrl"], values[id+".QueueName"] = u, u, name
			values[id+".Arn"] = fmt.Sprintf("arn:%s:sqs:%s:%s:%s", partition, region, account, name)
		}
	}
	for k, v := range vars.Extra {
		values[k] = v
	}
	return nil
}

func mapGet(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// cfnResolve turns a template node into plain JSON values with the
// intrinsic functions a policy document uses evaluated.
func cfnResolve(n *yaml.Node, vars map[string]string) (any, error) {
	switch n.Tag {
	case "!Sub":
		return cfnSub(n, vars)
	case "!Ref":
		return cfnRef(n.Value, vars)
	case "!GetAtt":
		return cfnGetAtt(n, vars)
	case "!Join":
		return cfnJoin(n, vars)
	}
	if strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!") {
		return nil, fmt.Errorf("intrinsic function %s is not supported in policy documents", n.Tag)
	}
	switch n.Kind {
	case yaml.AliasNode:
		return cfnResolve(n.Alias, vars)
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, err
		}
		return v, nil
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := cfnResolve(c, vars)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		if len(n.Content) == 2 {
			arg := n.Content[1]
			switch n.Content[0].Value {
			case "Fn::Sub":
				return cfnSub(arg, vars)
			case "Ref":
				return cfnRef(arg.Value, vars)
			case "Fn::GetAtt":
				return cfnGetAtt(arg, vars)
			case "Fn::Join":
				return cfnJoin(arg, vars)
			}
			if strings.HasPrefix(n.Content[0].Value, "Fn::") {
				return nil, fmt.Errorf("intrinsic function %s is not supported in policy documents", n.Content[0].Value)
			}
		}
		out := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			v, err := cfnResolve(n.Content[i+1], vars)
			if err != nil {
				return nil, err
			}
			out[n.Content[i].Value] = v
		}
		return out, nil
	}
	return nil, fmt.Errorf("unexpected YAML node at line %d", n.Line)
}

func cfnSub(n *yaml.Node, vars map[string]string) (any, error) {
	if n.Kind == yaml.ScalarNode {
		return substitute(n.Value, vars)
	}
	if n.Kind != yaml.SequenceNode || len(n.Content) != 2 {
		return nil, fmt.Errorf("Fn::Sub at line %d: want a string or [string, variables]", n.Line)
	}
	local := map[string]string{}
	for k, v := range vars {
		local[k] = v
	}
	m := n.Content[1]
	for i := 0; i+1 < len(m.Content); i += 2 {
		v, err := cfnResolve(m.Content[i+1], vars)
		if err != nil {
			return nil, err
		}
		local[m.Content[i].Value] = fmt.Sprint(v)
	}
	return substitute(n.Content[0].Value, local)
}

func cfnRef(name string, vars map[string]string) (any, error) {
	if v, ok := vars[name]; ok {
		return v, nil
	}
	return nil, fmt.Errorf("Ref %s: unknown parameter or resource", name)
}

func cfnGetAtt(n *yaml.Node, vars map[string]string) (any, error) {
	name := n.Value
	if n.Kind == yaml.SequenceNode && len(n.Content) == 2 {
		name = n.Content[0].Value + "." + n.Content[1].Value
	}
	if v, ok := vars[name]; ok {
		return v, nil
	}
	return nil, fmt.Errorf("Fn::GetAtt %s: unknown attribute", name)
}

func cfnJoin(n *yaml.Node, vars map[string]string) (any, error) {
	if n.Kind != yaml.SequenceNode || len(n.Content) != 2 {
		return nil, fmt.Errorf("Fn::Join at line %d: want [separator, list]", n.Line)
	}
	list, err := cfnResolve(n.Content[1], vars)
	if err != nil {
		return nil, err
	}
	items, ok := list.([]any)
	if !ok {
		return nil, fmt.Errorf("Fn::Join at line %d: want a list", n.Line)
	}
	parts := make([]string, len(items))
	for i, it := range items {
		parts[i] = fmt.Sprint(it)
	}
	return strings.Join(parts, n.Content[0].Value), nil
}

// AllowAll is a policy that allows every action on every resource, for a
// principal that should see the local AWS's consistency and throttling but
// no IAM refusals.
func AllowAll() Policy {
	return Policy{Name: "AllowAll", Version: "2012-10-17", Statement: []Statement{{Effect: "Allow", Action: Values{"*"}, Resource: Values{"*"}}}}
}
