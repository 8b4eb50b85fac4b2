package awslocal_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/test/awslocal"
)

func mustPolicy(t *testing.T, doc string) awslocal.Policy {
	t.Helper()
	p, err := awslocal.ParsePolicy("test", []byte(doc))
	require.NoError(t, err)
	return p
}

// TestEvaluate checks IAM's evaluation logic and condition operators on
// single requests.
func TestEvaluate(t *testing.T) {
	instance := "arn:aws:ec2:us-east-1:123456789012:instance/i-0123"
	owned := map[string][]string{"aws:ResourceTag/kubernetes.io/cluster/local": {"owned"}, "aws:ResourceTag/karpenter.sh/nodepool": {"default"}}
	for _, tc := range []struct {
		name     string
		policy   string
		req      awslocal.AuthRequest
		allowed  bool
		explicit bool
	}{
		{name: "no statement allows: implicit deny",
			policy: `{"Statement":[{"Effect":"Allow","Action":"ec2:Describe*","Resource":"*"}]}`,
			req:    awslocal.AuthRequest{Action: "ec2:CreateTags", Resource: instance}},
		{name: "action wildcard, case-insensitive",
			policy: `{"Statement":[{"Effect":"Allow","Action":"EC2:describe*","Resource":"*"}]}`,
			req:    awslocal.AuthRequest{Action: "ec2:DescribeInstances", Resource: "*"}, allowed: true},
		{name: "question-mark wildcard",
			policy: `{"Statement":[{"Effect":"Allow","Action":"ec2:?escribeInstances","Resource":"*"}]}`,
			req:    awslocal.AuthRequest{Action: "ec2:DescribeInstances", Resource: "*"}, allowed: true},
		{name: "explicit deny beats allow",
			policy: `{"Statement":[{"Effect":"Allow","Action":"*","Resource":"*"},{"Sid":"NoTerminate","Effect":"Deny","Action":"ec2:TerminateInstances","Resource":"*"}]}`,
			req:    awslocal.AuthRequest{Action: "ec2:TerminateInstances", Resource: instance}, explicit: true},
		{name: "NotAction",
			policy: `{"Statement":[{"Effect":"Allow","NotAction":"iam:*","Resource":"*"}]}`,
			req:    awslocal.AuthRequest{Action: "iam:GetRole", Resource: "*"}},
		{name: "resource ARN per field: region wildcard does not span the account",
			policy: `{"Statement":[{"Effect":"Allow","Action":"ec2:TerminateInstances","Resource":"arn:aws:ec2:*:instance/*"}]}`,
			req:    awslocal.AuthRequest{Action: "ec2:TerminateInstances", Resource: instance}},
		{name: "resource wildcard spans slashes in the resource field",
			policy: `{"Statement":[{"Effect":"Allow","Action":"iam:GetInstanceProfile","Resource":"arn:aws:iam::123456789012:instance-profile/*"}]}`,
			req:    awslocal.AuthRequest{Action: "iam:GetInstanceProfile", Resource: "arn:aws:iam::123456789012:instance-profile/karpenter/us-east-1/local/uid/local_123"}, allowed: true},
		{name: "image ARNs have no account",
			policy: `{"Statement":[{"Effect":"Allow","Action":"ec2:RunInstances","Resource":"arn:aws:ec2:us-east-1::image/*"}]}`,
			req:    awslocal.AuthRequest{Action: "ec2:RunInstances", Resource: "arn:aws:ec2:us-east-1::image/ami-1"}, allowed: true},
		{name: "NotResource",
			policy: `{"Statement":[{"Effect":"Allow","Action":"ec2:*","NotResource":"arn:aws:ec2:*:*:instance/*"}]}`,
			req:    awslocal.AuthRequest{Action: "ec2:TerminateInstances", Resource: instance}},
		{name: "StringEquals on a resource tag",
			policy: `{"Statement":[{"Effect":"Allow","Action":"ec2:TerminateInstances","Resource":"*","Condition":{"StringEquals":{"aws:ResourceTag/kubernetes.io/cluster/local":"owned"}}}]}`,
			req:    awslocal.AuthRequest{Action: "ec2:TerminateInstances", Resource: instance, Context: owned}, allowed: true},
		{name: "StringEquals: a missing key fails",
			policy: `{"Statement":[{"Effect":"Allow","Action":"ec2:TerminateInstances","Resource":"*","Condition":{"StringEquals":{"aws:ResourceTag/kubernetes.io/cluster/other":"owned"}}}]}`,
			req:    awslocal.AuthRequest{Action: "ec2:TerminateInstances", Resource: instance, Context: owned}},
		{name: "condition key names are case-insensitive",
			policy: `{"Statement":[{"Effect":"Allow","Action":"ec2:TerminateInstances","Resource":"*","Condition":{"StringEquals":{"AWS:RESOURCETAG/Kubernetes.io/Cluster/Local":"owned"}}}]}`,
			req:    awslocal.AuthRequest{Action: "ec2:TerminateInstances", Resource: instance, Context: owned}, allowed: true},
		{name: "StringLike wildcard",
			policy: `{"Statement":[{"Effect":"Allow","Action":"ec2:TerminateInstances","Resource":"*","Condition":{"StringLike":{"aws:ResourceTag/karpenter.sh/nodepool":"*"}}}]}`,
			req:    awslocal.AuthRequest{Action: "ec2:TerminateInstances", Resource: instance, Context: owned}, allowed: true},
		{name: "StringLike: absent key fails even against *",
			policy: `{"Statement":[{"Effect":"Allow","Action":"ec2:TerminateInstances","Resource":"*","Condition":{"StringLike":{"aws:ResourceTag/karpenter.sh/nodepool":"*"}}}]}`,
			req:    awslocal.AuthRequest{Action: "ec2:TerminateInstances", Resource: instance}},
		{name: "StringEqualsIfExists: absent key holds",
			policy: `{"Statement":[{"Effect":"Allow","Action":"ec2:CreateTags","Resource":"*","Condition":{"StringEqualsIfExists":{"aws:RequestTag/eks:eks-cluster-name":"local"}}}]}`,
			req:    awslocal.AuthRequest{Action: "ec2:CreateTags", Resource: instance}, allowed: true},
		{name: "StringEqualsIfExists: present key must match",
			policy: `{"Statement":[{"Effect":"Allow","Action":"ec2:CreateTags","Resource":"*","Condition":{"StringEqualsIfExists":{"aws:RequestTag/eks:eks-cluster-name":"local"}}}]}`,
			req:    awslocal.AuthRequest{Action: "ec2:CreateTags", Resource: instance, Context: map[string][]string{"aws:RequestTag/eks:eks-cluster-name": {"other"}}}},
		{name: "ForAllValues: every key in the set",
			policy: `{"Statement":[{"Effect":"Allow","Action":"ec2:CreateTags","Resource":"*","Condition":{"ForAllValues:StringEquals":{"aws:TagKeys":["Name","karpenter.sh/nodeclaim"]}}}]}`,
			req:    awslocal.AuthRequest{Action: "ec2:CreateTags", Resource: instance, Context: map[string][]string{"aws:TagKeys": {"Name", "karpenter.sh/nodeclaim"}}}, allowed: true},
		{name: "ForAllValues: one key outside the set fails",
			policy: `{"Statement":[{"Effect":"Allow","Action":"ec2:CreateTags","Resource":"*","Condition":{"ForAllValues:StringEquals":{"aws:TagKeys":["Name","karpenter.sh/nodeclaim"]}}}]}`,
			req:    awslocal.AuthRequest{Action: "ec2:CreateTags", Resource: instance, Context: map[string][]string{"aws:TagKeys": {"karpenter.sh/nodeclaim", "karpenter-go.io/launch-state"}}}},
		{name: "ForAllValues: no values holds vacuously",
			policy: `{"Statement":[{"Effect":"Allow","Action":"ec2:CreateTags","Resource":"*","Condition":{"ForAllValues:StringEquals":{"aws:TagKeys":["Name"]}}}]}`,
			req:    awslocal.AuthRequest{Action: "ec2:CreateTags", Resource: instance}, allowed: true},
		{name: "ForAnyValue: one match holds",
			policy: `{"Statement":[{"Effect":"Allow","Action":"ec2:CreateTags","Resource":"*","Condition":{"ForAnyValue:StringLike":{"aws:TagKeys":["karpenter.sh/*"]}}}]}`,
			req:    awslocal.AuthRequest{Action: "ec2:CreateTags", Resource: instance, Context: map[string][]string{"aws:TagKeys": {"Name", "karpenter.sh/nodeclaim"}}}, allowed: true},
		{name: "ForAnyValue: absent key fails",
			policy: `{"Statement":[{"Effect":"Allow","Action":"ec2:CreateTags","Resource":"*","Condition":{"ForAnyValue:StringLike":{"aws:TagKeys":["karpenter.sh/*"]}}}]}`,
			req:    awslocal.AuthRequest{Action: "ec2:CreateTags", Resource: instance}},
		{name: "Null true: the key must be absent",
			policy: `{"Statement":[{"Effect":"Allow","Action":"ec2:CreateTags","Resource":"*","Condition":{"Null":{"aws:RequestTag/team":"true"}}}]}`,
			req:    awslocal.AuthRequest{Action: "ec2:CreateTags", Resource: instance, Context: map[string][]string{"aws:RequestTag/team": {"a"}}}},
		{name: "Null false: the key must be present",
			policy: `{"Statement":[{"Effect":"Allow","Action":"ec2:CreateTags","Resource":"*","Condition":{"Null":{"aws:RequestTag/team":"false"}}}]}`,
			req:    awslocal.AuthRequest{Action: "ec2:CreateTags", Resource: instance, Context: map[string][]string{"aws:RequestTag/team": {"a"}}}, allowed: true},
		{name: "Bool",
			policy: `{"Statement":[{"Effect":"Deny","Action":"*","Resource":"*","Condition":{"Bool":{"aws:SecureTransport":false}}},{"Effect":"Allow","Action":"*","Resource":"*"}]}`,
			req:    awslocal.AuthRequest{Action: "sqs:ReceiveMessage", Resource: "*", Context: map[string][]string{"aws:SecureTransport": {"true"}}}, allowed: true},
		{name: "StringNotEquals: absent key holds",
			policy: `{"Statement":[{"Effect":"Allow","Action":"*","Resource":"*","Condition":{"StringNotEquals":{"aws:RequestedRegion":"eu-west-1"}}}]}`,
			req:    awslocal.AuthRequest{Action: "ec2:DescribeImages", Resource: "*"}, allowed: true},
		{name: "any value of a list matches (OR within a key)",
			policy: `{"Statement":[{"Effect":"Allow","Action":"iam:PassRole","Resource":"*","Condition":{"StringEquals":{"iam:PassedToService":["ec2.amazonaws.com","ec2.amazonaws.com.cn"]}}}]}`,
			req:    awslocal.AuthRequest{Action: "iam:PassRole", Resource: "*", Context: map[string][]string{"iam:PassedToService": {"ec2.amazonaws.com"}}}, allowed: true},
		{name: "every key must hold (AND across keys and operators)",
			policy: `{"Statement":[{"Effect":"Allow","Action":"ec2:TerminateInstances","Resource":"*","Condition":{"StringEquals":{"aws:ResourceTag/kubernetes.io/cluster/local":"owned"},"StringLike":{"aws:ResourceTag/team":"*"}}}]}`,
			req:    awslocal.AuthRequest{Action: "ec2:TerminateInstances", Resource: instance, Context: owned}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := awslocal.Evaluate([]awslocal.Policy{mustPolicy(t, tc.policy)}, tc.req)
			require.Equal(t, tc.allowed, d.Allowed, "%+v", d)
			require.Equal(t, tc.explicit, d.ExplicitDeny, "%+v", d)
		})
	}
}

// TestParsePolicyRefuses checks the documents IAM would refuse to attach.
func TestParsePolicyRefuses(t *testing.T) {
	for _, doc := range []string{
		`{"Statement":[]}`,
		`{"Statement":[{"Effect":"Maybe","Action":"*","Resource":"*"}]}`,
		`{"Statement":[{"Effect":"Allow","Resource":"*"}]}`,
		`{"Statement":[{"Effect":"Allow","Action":"*","NotAction":"iam:*","Resource":"*"}]}`,
		`{"Statement":[{"Effect":"Allow","Action":"*"}]}`,
		`{"Statement":[{"Effect":"Allow","Action":"CreateTags","Resource":"*"}]}`,
		`{"Statement":[{"Effect":"Allow","Action":"*","Resource":"*","Condition":{"StringSorta":{"a":"b"}}}]}`,
		`{"Statement":[{"Effect":"Allow","Action":"*","Resource":"*","Condition":{"ForSomeValues:StringEquals":{"a":"b"}}}]}`,
	} {
		_, err := awslocal.ParsePolicy("bad", []byte(doc))
		require.Error(t, err, doc)
	}
	// One statement may be an object rather than a list.
	p, err := awslocal.ParsePolicy("one", []byte(`{"Version":"2012-10-17","Statement":{"Effect":"Allow","Action":"s3:*","Resource":"*"}}`))
	require.NoError(t, err)
	require.Len(t, p.Statement, 1)
}

// TestUpstreamControllerPolicies reads the test data with its variables set
// and checks the facts it was written from: six policies, eighteen
// statements, the cluster's names in place.
func TestUpstreamControllerPolicies(t *testing.T) {
	pols, err := awslocal.UpstreamControllerPolicies(awslocal.PolicyVars{ClusterName: "local", QueueName: "karpenter-local"})
	require.NoError(t, err)
	require.Len(t, pols, 6)
	n := 0
	for _, p := range pols {
		n += len(p.Statement)
		require.True(t, strings.HasSuffix(p.Name, "-local"), p.Name)
	}
	require.Equal(t, 18, n)
	allowed := func(r awslocal.AuthRequest) bool { return awslocal.Evaluate(pols, r).Allowed }
	require.True(t, allowed(awslocal.AuthRequest{Action: "iam:PassRole", Resource: "arn:aws:iam::123456789012:role/KarpenterNodeRole-local",
		Context: map[string][]string{"iam:PassedToService": {"ec2.amazonaws.com"}}}))
	require.False(t, allowed(awslocal.AuthRequest{Action: "iam:PassRole", Resource: "arn:aws:iam::123456789012:role/Admin",
		Context: map[string][]string{"iam:PassedToService": {"ec2.amazonaws.com"}}}))
	require.True(t, allowed(awslocal.AuthRequest{Action: "sqs:ReceiveMessage", Resource: "arn:aws:sqs:us-east-1:123456789012:karpenter-local"}))
	require.False(t, allowed(awslocal.AuthRequest{Action: "iam:GetRole", Resource: "arn:aws:iam::123456789012:role/KarpenterNodeRole-local"}))
	require.False(t, allowed(awslocal.AuthRequest{Action: "ec2:DescribeInstances", Resource: "*", Context: map[string][]string{"aws:RequestedRegion": {"eu-west-1"}}}))
}

// TestCloudFormationPolicies resolves a template's policy resources with
// the short and long intrinsic function forms.
func TestCloudFormationPolicies(t *testing.T) {
	tmpl := `
Parameters:
  ClusterName: {Type: String}
  Extra: {Type: String, Default: "x"}
Resources:
  NodeRole:
    Type: AWS::IAM::Role
    Properties: {RoleName: !Sub "KarpenterNodeRole-${ClusterName}"}
  Queue:
    Type: AWS::SQS::Queue
  BPolicy:
    Type: AWS::IAM::ManagedPolicy
    Properties:
      ManagedPolicyName: !Sub "B-${ClusterName}"
      PolicyDocument:
        Version: "2012-10-17"
        Statement:
          - Sid: Pass
            Effect: Allow
            Action: iam:PassRole
            Resource: !GetAtt KarpenterNodeRole.Arn
          - Sid: Queue
            Effect: Allow
            Action: [sqs:ReceiveMessage]
            Resource: {"Fn::GetAtt": [KarpenterInterruptionQueue, Arn]}
          - Sid: Joined
            Effect: Allow
            Action: eks:DescribeCluster
            Resource: !Join [":", ["arn", !Ref "AWS::Partition", "eks", !Ref "AWS::Region", !Ref "AWS::AccountId", !Sub "cluster/${ClusterName}"]]
  APolicy:
    Type: AWS::IAM::ManagedPolicy
    Properties:
      PolicyDocument:
        Statement:
          - Effect: Allow
            Action: ec2:DescribeImages
            Resource: "*"
            Condition:
              StringEquals:
                aws:RequestedRegion: !Sub ["${R}", {R: !Ref "AWS::Region"}]
                x: !Ref Extra
`
	pols, err := awslocal.CloudFormationPolicies([]byte(tmpl), awslocal.PolicyVars{ClusterName: "local"})
	require.NoError(t, err)
	require.Len(t, pols, 2)
	require.Equal(t, "APolicy", pols[0].Name)
	require.Equal(t, awslocal.Values{"us-east-1"}, pols[0].Statement[0].Condition["StringEquals"]["aws:RequestedRegion"])
	require.Equal(t, awslocal.Values{"x"}, pols[0].Statement[0].Condition["StringEquals"]["x"])
	require.Equal(t, "B-local", pols[1].Name)
	require.Equal(t, awslocal.Values{"arn:aws:iam::123456789012:role/KarpenterNodeRole-local"}, pols[1].Statement[0].Resource)
	require.Equal(t, awslocal.Values{"arn:aws:sqs:us-east-1:123456789012:local"}, pols[1].Statement[1].Resource)
	require.Equal(t, awslocal.Values{"arn:aws:eks:us-east-1:123456789012:cluster/local"}, pols[1].Statement[2].Resource)

	_, err = awslocal.CloudFormationPolicies([]byte("Resources:\n  P:\n    Type: AWS::IAM::ManagedPolicy\n    Properties:\n      PolicyDocument:\n        Statement:\n          - {Effect: Allow, Action: '*', Resource: !Sub '${Nope}'}\n"), awslocal.PolicyVars{ClusterName: "c"})
	require.ErrorContains(t, err, "Nope")
}

// TestUnneededRules: a statement or action no logged call needs is found;
// one that some call needs is not.
func TestUnneededRules(t *testing.T) {
	p := mustPolicy(t, `{"Statement":[
		{"Sid":"Read","Effect":"Allow","Action":["ec2:DescribeImages","ec2:DescribeSubnets"],"Resource":"*"},
		{"Sid":"Tag","Effect":"Allow","Action":"ec2:CreateTags","Resource":"*"},
		{"Sid":"Never","Effect":"Allow","Action":"iam:GetRole","Resource":"*"},
		{"Sid":"Guard","Effect":"Deny","Action":"iam:*","Resource":"*"}]}`)
	log := []awslocal.LoggedRequest{
		{Call: "ec2:DescribeImages", Request: awslocal.AuthRequest{Action: "ec2:DescribeImages", Resource: "*"}},
		{Call: "ec2:CreateTags", Request: awslocal.AuthRequest{Action: "ec2:CreateTags", Resource: "arn:aws:ec2:us-east-1:123456789012:instance/i-1"}},
		{Call: "iam:ListRoles", Request: awslocal.AuthRequest{Action: "iam:ListRoles", Resource: "*"}}, // denied anyway
	}
	got := awslocal.UnneededRules([]awslocal.Policy{p}, log)
	var names []string
	for _, u := range got {
		names = append(names, u.String())
	}
	require.ElementsMatch(t, []string{"test Read action ec2:DescribeSubnets", "test Never"}, names)
}
