package amifamily

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/client-go/discovery"
)

// ServerVersion returns a KubernetesVersion func reading the API server's
// minor version ("1.34") through discovery, as upstream does when the
// cluster is not EKS.
func ServerVersion(d discovery.ServerVersionInterface) func(context.Context) (string, error) {
	return func(context.Context) (string, error) {
		v, err := d.ServerVersion()
		if err != nil {
			return "", fmt.Errorf("discovering the kubernetes version: %w", err)
		}
		return v.Major + "." + strings.TrimSuffix(v.Minor, "+"), nil
	}
}
