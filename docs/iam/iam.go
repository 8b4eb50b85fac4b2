// Package iam reads the IAM policy the project ships for its controller
// (cloudformation.yaml, documented in docs/iam.md), so tests can run the
// controller under exactly the statements a user deploys. It resolves the
// template's intrinsic functions for one cluster, region and account, the way
// CloudFormation would, and returns each controller policy as a JSON document
// and as parsed statements.
package iam

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Template is the CloudFormation template as shipped.
//
//go:embed cloudformation.yaml
var Template []byte

// Params are what CloudFormation would substitute into the template.
type Params struct {
	ClusterName string
	Region      string
	AccountID   string
	// Partition defaults to "aws", URLSuffix to "amazonaws.com".
	Partition string
	URLSuffix string
}

func (p Params) withDefaults() Params {
	if p.Partition == "" {
		p.Partition = "aws"
	}
	if p.URLSuffix == "" {
		p.URLSuffix = "amazonaws.com"
	}
	return p
}

// NodeRoleName is the name of the node role the template creates.
func NodeRoleName(clusterName string) string { return "KarpenterNodeRole-" + clusterName }

// NodeRoleARN is the node role's ARN.
func (p Params) NodeRoleARN() string {
	p = p.withDefaults()
	return fmt.Sprintf("arn:%s:iam::%s:role/%s", p.Partition, p.AccountID, NodeRoleName(p.ClusterName))
}

// QueueARN is the interruption queue's ARN (the queue is named after the
// cluster).
func (p Params) QueueARN() string {
	p = p.withDefaults()
	return fmt.Sprintf("arn:%s:sqs:%s:%s:%s", p.Partition, p.Region, p.AccountID, p.ClusterName)
}

// Policy is one of the controller's managed policies.
type Policy struct {
	// Resource is the policy's logical id in the template.
	Resource string
	// Name is its ManagedPolicyName.
	Name string
	// Document is the policy document, as IAM would store it.
	Document string
	// Statements are Document's statements.
	Statements []Statement
}

// Statement is one policy statement, with single values written as lists.
type Statement struct {
	Sid       string
	Effect    string
	Action    []string
	Resource  []string
	Condition map[string]map[string][]string
}

// ControllerPolicies are the controller's managed policies, in the
// template's resource-name order, resolved for p.
func ControllerPolicies(p Params) ([]Policy, error) {
	p = p.withDefaults()
	var tmpl struct {
		Resources map[string]struct {
			Type       string         `json:"Type"`
			Properties map[string]any `json:"Properties"`
		} `json:"Resources"`
	}
	if err := yaml.Unmarshal(Template, &tmpl); err != nil {
		return nil, fmt.Errorf("reading the CloudFormation template: %w", err)
	}
	names := make([]string, 0, len(tmpl.Resources))
	for name, r := range tmpl.Resources {
		if r.Type == "AWS::IAM::ManagedPolicy" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	out := make([]Policy, 0, len(names))
	for _, name := range names {
		props := tmpl.Resources[name].Properties
		policyName, err := resolve(props["ManagedPolicyName"], p)
		if err != nil {
			return nil, fmt.Errorf("%s: name: %w", name, err)
		}
		doc, err := resolve(props["PolicyDocument"], p)
		if err != nil {
			return nil, fmt.Errorf("%s: policy document: %w", name, err)
		}
		stmts, err := parseStatements(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, Policy{Resource: name, Name: policyName, Document: doc, Statements: stmts})
	}
	return out, nil
}

var subVar = regexp.MustCompile(`\$\{([A-Za-z0-9:.]+)\}`)

// resolve evaluates the intrinsic functions the template uses for strings:
// a literal, Fn::Sub (with or without a variable map) and Fn::GetAtt of the
// node role's and queue's ARNs.
func resolve(v any, p Params) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case map[string]any:
		if sub, ok := v["Fn::Sub"]; ok {
			return substitute(sub, p)
		}
		if att, ok := v["Fn::GetAtt"]; ok {
			return getAtt(att, p)
		}
	}
	return "", fmt.Errorf("unsupported value %v", v)
}

func substitute(sub any, p Params) (string, error) {
	vars := map[string]string{
		"AWS::Partition": p.Partition,
		"AWS::Region":    p.Region,
		"AWS::AccountId": p.AccountID,
		"AWS::URLSuffix": p.URLSuffix,
		"ClusterName":    p.ClusterName,
	}
	var text string
	switch s := sub.(type) {
	case string:
		text = s
	case []any:
		if len(s) != 2 {
			return "", fmt.Errorf("Fn::Sub takes a string and a map, got %d items", len(s))
		}
		var ok bool
		if text, ok = s[0].(string); !ok {
			return "", fmt.Errorf("Fn::Sub's first item is not a string")
		}
		m, ok := s[1].(map[string]any)
		if !ok {
			return "", fmt.Errorf("Fn::Sub's second item is not a map")
		}
		for k, v := range m {
			r, err := resolve(v, p)
			if err != nil {
				return "", fmt.Errorf("Fn::Sub variable %s: %w", k, err)
			}
			vars[k] = r
		}
	default:
		return "", fmt.Errorf("unsupported Fn::Sub %v", sub)
	}
	var missing []string
	out := subVar.ReplaceAllStringFunc(text, func(m string) string {
		name := m[2 : len(m)-1]
		if v, ok := vars[name]; ok {
			return v
		}
		missing = append(missing, name)
		return m
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("Fn::Sub: unknown variables %s", strings.Join(missing, ", "))
	}
	return out, nil
}

func getAtt(att any, p Params) (string, error) {
	parts, ok := att.([]any)
	if !ok || len(parts) != 2 {
		return "", fmt.Errorf("unsupported Fn::GetAtt %v", att)
	}
	switch fmt.Sprint(parts[0], ".", parts[1]) {
	case "NodeRole.Arn":
		return p.NodeRoleARN(), nil
	case "InterruptionQueue.Arn":
		return p.QueueARN(), nil
	}
	return "", fmt.Errorf("unsupported Fn::GetAtt %v", att)
}

func parseStatements(doc string) ([]Statement, error) {
	var raw struct {
		Statement []struct {
			Sid       string                    `json:"Sid"`
			Effect    string                    `json:"Effect"`
			Action    json.RawMessage           `json:"Action"`
			Resource  json.RawMessage           `json:"Resource"`
			Condition map[string]map[string]any `json:"Condition"`
		} `json:"Statement"`
	}
	if err := json.Unmarshal([]byte(doc), &raw); err != nil {
		return nil, fmt.Errorf("parsing the policy document: %w", err)
	}
	out := make([]Statement, 0, len(raw.Statement))
	for _, s := range raw.Statement {
		st := Statement{Sid: s.Sid, Effect: s.Effect}
		var err error
		if st.Action, err = stringOrList(s.Action); err != nil {
			return nil, fmt.Errorf("statement %s: Action: %w", s.Sid, err)
		}
		if st.Resource, err = stringOrList(s.Resource); err != nil {
			return nil, fmt.Errorf("statement %s: Resource: %w", s.Sid, err)
		}
		if len(s.Condition) > 0 {
			st.Condition = map[string]map[string][]string{}
			for op, keys := range s.Condition {
				st.Condition[op] = map[string][]string{}
				for k, v := range keys {
					switch v := v.(type) {
					case string:
						st.Condition[op][k] = []string{v}
					case []any:
						for _, x := range v {
							st.Condition[op][k] = append(st.Condition[op][k], fmt.Sprint(x))
						}
					default:
						return nil, fmt.Errorf("statement %s: condition %s %s: unsupported value %v", s.Sid, op, k, v)
					}
				}
			}
		}
		out = append(out, st)
	}
	return out, nil
}

func stringOrList(raw json.RawMessage) ([]string, error) {
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, err
	}
	return many, nil
}
