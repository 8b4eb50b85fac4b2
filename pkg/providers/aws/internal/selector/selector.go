// Package selector runs an EC2NodeClass's selector terms, already turned
// into EC2 filter sets, the way the subnet and security-group providers
// both resolve them: one paginated Describe* query per set, the answers
// unioned by id in EC2's order, and a cache key that is the same for equal
// selectors whatever their order.
package selector

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// Pager is the shape of an EC2 SDK paginator with output O.
type Pager[O any] interface {
	HasMorePages() bool
	NextPage(ctx context.Context, optFns ...func(*ec2.Options)) (O, error)
}

// Union queries every filter set through the paginator pages returns,
// takes items from each page and keeps the first item of each id. An
// error names the filter set whose query failed.
func Union[T, O any](ctx context.Context, sets [][]ec2types.Filter, pages func([]ec2types.Filter) Pager[O], items func(O) []T, id func(T) string) ([]T, error) {
	seen := map[string]bool{}
	var out []T
	for _, filters := range sets {
		for p := pages(filters); p.HasMorePages(); {
			page, err := p.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", String(filters), err)
			}
			for _, it := range items(page) {
				if k := id(it); !seen[k] {
					seen[k] = true
					out = append(out, it)
				}
			}
		}
	}
	return out, nil
}

// String renders one filter set for logs and errors, e.g.
// "[tag:env=prod subnet-id=a,b]".
func String(filters []ec2types.Filter) string {
	parts := make([]string, 0, len(filters))
	for _, f := range filters {
		parts = append(parts, aws.ToString(f.Name)+"="+strings.Join(f.Values, ","))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// Key is the cache key of filter sets: their renderings, sorted, so the
// same terms in another order share an entry.
func Key(sets [][]ec2types.Filter) string {
	parts := make([]string, 0, len(sets))
	for _, fs := range sets {
		parts = append(parts, String(fs))
	}
	sort.Strings(parts)
	return strings.Join(parts, "|")
}
