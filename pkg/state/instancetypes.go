package state

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
)

// instanceTypesTimeout bounds one lookup; the informer that asks must not
// hang on a slow provider.
const instanceTypesTimeout = 10 * time.Second

// CloudInstanceTypes is the usual Options.InstanceTypes: the NodePool read
// through kube (the manager's cache) and its instance types from the cloud
// provider (which caches its catalog). A pool that cannot be read or a
// provider error yields nil, so the NodeClaim counts its requests.
func CloudInstanceTypes(kube client.Reader, cloud cloudprovider.CloudProvider) func(nodePool string) []*cloudprovider.InstanceType {
	return func(name string) []*cloudprovider.InstanceType {
		ctx, cancel := context.WithTimeout(context.Background(), instanceTypesTimeout)
		defer cancel()
		np := &v1.NodePool{}
		if err := kube.Get(ctx, client.ObjectKey{Name: name}, np); err != nil {
			return nil
		}
		its, err := cloud.GetInstanceTypes(ctx, np)
		if err != nil {
			log.Log.WithName("state").Error(err, "listing instance types for nodepool limits", "NodePool", map[string]string{"name": name})
			return nil
		}
		return its
	}
}
