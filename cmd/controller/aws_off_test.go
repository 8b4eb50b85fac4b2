//go:build kwokonly

package main

// awsRejections: the kwokonly build refuses the AWS provider, from the
// flag or the environment, and knows none of its flags.
var awsRejections = []rejection{
	{"aws", []string{"--cloud-provider=aws"}, nil, "built without the AWS provider"},
	{"aws from env", nil, map[string]string{"CLOUD_PROVIDER": "aws", "CLUSTER_NAME": "c"}, "built without the AWS provider"},
	{"an aws flag", []string{"--cluster-name=c"}, nil, "parsing flags"},
}
