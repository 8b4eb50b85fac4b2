package cloudprovider

import "context"

type instanceTypesKey struct{}

// WithInstanceTypes hands Create the instance types to launch from: the
// NodeClaim's NodePool's types as a decorator changed them (NodeOverlays'
// prices and capacity). A provider's Create should fit requests and rank
// offerings against these, when present, rather than its own catalog.
func WithInstanceTypes(ctx context.Context, its []*InstanceType) context.Context {
	return context.WithValue(ctx, instanceTypesKey{}, its)
}

// InstanceTypesFrom returns what WithInstanceTypes stored, if anything.
func InstanceTypesFrom(ctx context.Context) ([]*InstanceType, bool) {
	its, ok := ctx.Value(instanceTypesKey{}).([]*InstanceType)
	return its, ok
}
