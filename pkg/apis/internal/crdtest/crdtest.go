// Package crdtest holds what the API packages' validation tests share: a
// lazily started control plane with the project's CRDs installed, building
// objects from YAML, and asserting on the API server's field errors.
package crdtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/karpenter-go/karpenter/test/controlplane"
)

// Env starts one control plane the first time a test asks for it, so that a
// package whose selected tests need no API server does not pay for one.
// Call Stop from TestMain after m.Run.
type Env struct {
	once sync.Once
	cp   *controlplane.ControlPlane
	err  error
}

// Client returns a client of the shared control plane, starting it on first
// use. A start failure fails every test that needs it.
func (e *Env) Client(t testing.TB) client.Client {
	t.Helper()
	e.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		e.cp, e.err = controlplane.Start(ctx, controlplane.Options{})
	})
	if e.err != nil {
		t.Fatalf("starting control plane: %v", e.err)
	}
	return e.cp.Client
}

// Stop stops the control plane if it was started.
func (e *Env) Stop() {
	if e.cp != nil {
		e.cp.Stop()
	}
}

// Object parses a single YAML document into an unstructured object.
func Object(t testing.TB, doc string) *unstructured.Unstructured {
	t.Helper()
	obj := map[string]any{}
	if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
		t.Fatalf("parsing YAML: %v", err)
	}
	return &unstructured.Unstructured{Object: obj}
}

// Documents splits a multi-document YAML file into objects, skipping empty
// documents.
func Documents(t testing.TB, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range splitDocuments(string(data)) {
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("parsing YAML document: %v", err)
		}
		if len(obj) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
	return out
}

func splitDocuments(s string) []string {
	var docs []string
	var cur strings.Builder
	for _, line := range strings.SplitAfter(s, "\n") {
		if strings.TrimRight(line, " \t\r\n") == "---" {
			docs = append(docs, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteString(line)
	}
	return append(docs, cur.String())
}

// Set stores value at path inside obj, creating intermediate maps. A path
// element "[i]" indexes a list.
func Set(obj map[string]any, value any, path ...string) {
	parent, last := walk(obj, path)
	switch p := parent.(type) {
	case map[string]any:
		p[last] = value
	case []any:
		p[index(last)] = value
	}
}

// Delete removes the field at path, if present.
func Delete(obj map[string]any, path ...string) {
	parent, last := walk(obj, path)
	if p, ok := parent.(map[string]any); ok {
		delete(p, last)
	}
}

// Get returns the value at path, or nil.
func Get(obj map[string]any, path ...string) any {
	var cur any = obj
	for _, elem := range path {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[elem]
		case []any:
			i := index(elem)
			if i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	return cur
}

func walk(obj map[string]any, path []string) (any, string) {
	var cur any = obj
	for i, elem := range path[:len(path)-1] {
		next := Get(obj, path[:i+1]...)
		if next == nil {
			next = map[string]any{}
			if m, ok := cur.(map[string]any); ok {
				m[elem] = next
			}
		}
		cur = next
	}
	return cur, path[len(path)-1]
}

func index(elem string) int {
	var i int
	if _, err := fmt.Sscanf(elem, "[%d]", &i); err != nil {
		panic(fmt.Sprintf("bad list index %q", elem))
	}
	return i
}

// DryRunCreate submits obj for creation without persisting it, so that it
// runs through defaulting and validation only. On success obj holds what the
// API server would have stored.
func DryRunCreate(ctx context.Context, c client.Client, obj client.Object) error {
	return c.Create(ctx, obj, client.DryRunAll)
}

// WantField is one expected field error: the field path as the API server
// reports it and a substring of its message.
type WantField struct {
	Field   string
	Message string
}

// RequireInvalid fails the test unless err is an Invalid error carrying every
// wanted field error.
func RequireInvalid(t testing.TB, err error, want ...WantField) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted, want rejection with %v", want)
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsInvalid(err) {
		t.Fatalf("got error %v, want an Invalid status error with %v", err, want)
	}
	details := status.Status().Details
	var causes []metav1.StatusCause
	if details != nil {
		causes = details.Causes
	}
	t.Logf("rejected with:\n%s", formatCauses(causes))
	for _, w := range want {
		if !hasCause(causes, w) {
			t.Errorf("no cause with field %q and message containing %q in:\n%s", w.Field, w.Message, formatCauses(causes))
		}
	}
}

func hasCause(causes []metav1.StatusCause, w WantField) bool {
	for _, c := range causes {
		if c.Field == w.Field && strings.Contains(c.Message, w.Message) {
			return true
		}
	}
	return false
}

func formatCauses(causes []metav1.StatusCause) string {
	var b strings.Builder
	for _, c := range causes {
		fmt.Fprintf(&b, "  %s: %s\n", c.Field, c.Message)
	}
	return b.String()
}
