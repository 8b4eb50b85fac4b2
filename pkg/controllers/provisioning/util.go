package provisioning

import (
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

func typesUID(s string) types.UID { return types.UID(s) }

func resourceInt(n int64) *resource.Quantity { return resource.NewQuantity(n, resource.DecimalSI) }
