package lifecycle

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestAllConflicts(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "n1", errors.New("the object has been modified"))
	tests := []struct {
		name string
		errs []error
		want bool
	}{
		{"a wrapped conflict, as syncNode returns it", []error{fmt.Errorf("syncing node n1: %w", conflict)}, true},
		{"conflict and another error", []error{conflict, errors.New("boom")}, false},
		{"no conflict", []error{apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, "n1")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, allConflicts(tt.errs)) })
	}
}
