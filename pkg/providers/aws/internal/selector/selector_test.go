package selector

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pages is a paginator over canned pages; err fails the page at failAt.
type pages struct {
	pages  [][]string
	next   int
	failAt int
}

func (p *pages) HasMorePages() bool { return p.next < len(p.pages) }

func (p *pages) NextPage(context.Context, ...func(*ec2.Options)) ([]string, error) {
	if p.next == p.failAt {
		return nil, errors.New("throttled")
	}
	p.next++
	return p.pages[p.next-1], nil
}

func filter(name string, values ...string) ec2types.Filter {
	return ec2types.Filter{Name: aws.String(name), Values: values}
}

func TestUnion(t *testing.T) {
	sets := [][]ec2types.Filter{{filter("tag:env", "prod")}, {filter("subnet-id", "b", "c")}}
	answers := map[string][][]string{
		"[tag:env=prod]":  {{"a", "b"}, {"a", "d"}},
		"[subnet-id=b,c]": {{"c", "b"}},
	}
	run := func(failSet string) ([]string, error) {
		return Union(context.Background(), sets,
			func(fs []ec2types.Filter) Pager[[]string] {
				p := &pages{pages: answers[String(fs)], failAt: -1}
				if String(fs) == failSet {
					p.failAt = 0
				}
				return p
			},
			func(page []string) []string { return page },
			func(s string) string { return s })
	}
	got, err := run("")
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b", "d", "c"}, got, "every page of every set, first of each id, in EC2's order")

	_, err = run("[subnet-id=b,c]")
	assert.EqualError(t, err, "[subnet-id=b,c]: throttled", "the error names the failing set")
}

func TestKey(t *testing.T) {
	a := []ec2types.Filter{filter("tag:env", "prod"), filter("tag-key", "team")}
	b := []ec2types.Filter{filter("subnet-id", "s-1", "s-2")}
	assert.Equal(t, "[subnet-id=s-1,s-2]|[tag:env=prod tag-key=team]", Key([][]ec2types.Filter{a, b}))
	assert.Equal(t, Key([][]ec2types.Filter{a, b}), Key([][]ec2types.Filter{b, a}), "order of terms does not matter")
	assert.NotEqual(t, Key([][]ec2types.Filter{a}), Key([][]ec2types.Filter{a, b}))
}
