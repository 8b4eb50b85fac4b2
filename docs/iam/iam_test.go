package iam_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/docs/iam"
)

var params = iam.Params{ClusterName: "my-cluster", Region: "eu-west-1", AccountID: "111122223333"}

// upstreamActions are the actions upstream's controller policy grants
// (shared/reference/aws/iam-policy-facts.md): a team that reuses its
// upstream role must be able to run this controller, so the shipped policy
// may not need anything beyond them.
var upstreamActions = []string{
	"ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate", "ec2:CreateTags",
	"ec2:TerminateInstances", "ec2:DeleteLaunchTemplate",
	"iam:PassRole", "iam:CreateInstanceProfile", "iam:TagInstanceProfile", "iam:AddRoleToInstanceProfile",
	"iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile", "eks:DescribeCluster",
	"sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage", "arc-zonal-shift:GetManagedResource",
	"ec2:DescribeCapacityReservations", "ec2:DescribeImages", "ec2:DescribeInstances", "ec2:DescribeInstanceStatus",
	"ec2:DescribeInstanceTypeOfferings", "ec2:DescribeInstanceTypes", "ec2:DescribeLaunchTemplates",
	"ec2:DescribePlacementGroups", "ec2:DescribeSecurityGroups", "ec2:DescribeSpotPriceHistory", "ec2:DescribeSubnets",
	"ssm:GetParameter", "pricing:GetProducts", "iam:ListInstanceProfiles", "iam:GetInstanceProfile",
}

func TestControllerPolicies(t *testing.T) {
	policies, err := iam.ControllerPolicies(params)
	require.NoError(t, err)
	require.Len(t, policies, 3)
	sids := map[string]bool{}
	for _, p := range policies {
		assert.True(t, strings.HasSuffix(p.Name, "-my-cluster"), p.Name)
		assert.NotContains(t, p.Document, "${", "%s: every variable is substituted", p.Name)
		// IAM's limit for a managed policy, whitespace excluded.
		assert.Less(t, len(strings.Join(strings.Fields(p.Document), "")), 6144, p.Name)
		var doc map[string]any
		require.NoError(t, json.Unmarshal([]byte(p.Document), &doc), p.Name)
		for _, s := range p.Statements {
			assert.NotEmpty(t, s.Sid)
			assert.False(t, sids[s.Sid], "Sid %s is unique", s.Sid)
			sids[s.Sid] = true
			assert.Equal(t, "Allow", s.Effect, s.Sid)
			require.NotEmpty(t, s.Action, s.Sid)
			require.NotEmpty(t, s.Resource, s.Sid)
			for _, a := range s.Action {
				assert.Contains(t, upstreamActions, a, "%s: upstream's policy grants %s", s.Sid, a)
			}
		}
	}
}

// TestMutatingActionsAreScoped: every action that changes something is
// limited by a tag condition or to one resource ARN, never granted on "*"
// unconditionally.
func TestMutatingActionsAreScoped(t *testing.T) {
	policies, err := iam.ControllerPolicies(params)
	require.NoError(t, err)
	readOnly := func(a string) bool {
		_, verb, _ := strings.Cut(a, ":")
		for _, p := range []string{"Describe", "Get", "List", "ReceiveMessage"} {
			if strings.HasPrefix(verb, p) {
				return true
			}
		}
		return false
	}
	for _, p := range policies {
		for _, s := range p.Statements {
			for _, a := range s.Action {
				if readOnly(a) {
					continue
				}
				scoped := false
				for _, keys := range s.Condition {
					for k := range keys {
						if strings.Contains(k, "Tag/") || k == "iam:PassedToService" {
							scoped = true
						}
					}
				}
				single := len(s.Resource) == 1 && !strings.HasSuffix(s.Resource[0], "*")
				assert.True(t, scoped || single || referencedOnly(s.Resource), "%s %s: %s is scoped by tags or to one resource", p.Name, s.Sid, a)
			}
		}
	}
}

func TestResolvedARNs(t *testing.T) {
	policies, err := iam.ControllerPolicies(params)
	require.NoError(t, err)
	var pass, queue []string
	for _, p := range policies {
		for _, s := range p.Statements {
			switch s.Sid {
			case "PassNodeRoleToInstances":
				pass = s.Resource
			case "ConsumeInterruptionQueue":
				queue = s.Resource
			}
		}
	}
	assert.Equal(t, []string{"arn:aws:iam::111122223333:role/KarpenterNodeRole-my-cluster"}, pass)
	assert.Equal(t, []string{"arn:aws:sqs:eu-west-1:111122223333:my-cluster"}, queue)
}

// referencedOnly: every resource is one a launch uses without changing it
// (its image, subnet, groups, reservation, placement group); a launch also
// needs the tag-scoped statements for what it creates.
func referencedOnly(resources []string) bool {
	for _, r := range resources {
		used := false
		for _, kind := range []string{":image/", ":snapshot/", ":subnet/", ":security-group/", ":capacity-reservation/", ":placement-group/"} {
			used = used || strings.Contains(r, kind)
		}
		if !used {
			return false
		}
	}
	return true
}
