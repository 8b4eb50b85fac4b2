//go:build !kwokonly

package main

// awsRejections are the AWS settings Run refuses in the default build.
var awsRejections = []rejection{
	{"aws without a cluster name", []string{"--cloud-provider=aws"}, nil, "missing field, cluster-name"},
	{"aws settings from env", nil, map[string]string{"CLOUD_PROVIDER": "aws", "CLUSTER_NAME": "c", "RESERVED_ENIS": "-1"}, "reserved-enis cannot be negative"},
}
