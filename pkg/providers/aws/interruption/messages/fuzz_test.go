package messages_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/karpenter-go/karpenter/pkg/providers/aws/interruption/messages"
)

// FuzzParse checks Parse's contract on any body: it never panics; it returns
// either a message or a *ParseError wrapping one of the sentinels, never
// both or neither; a message has a known kind, and kinds that act on
// instances name at least one well-formed instance id. `make test` runs it
// for 10s; run it longer by hand with
// go test -run '^$' -fuzz '^FuzzParse$' -fuzztime 10m ./pkg/providers/aws/interruption
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob("testdata/*.json")
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	for _, s := range []string{"", "null", "{}", "[]", `{"detail":null}`, spotPrefix + `"detail":{"instance-id":"i-0abc"}}`,
		healthPrefix + `[{"entityValue":"i-0a"}]}}`, crPrefix + `"resources":"x","detail":{"instance-id":"i-0a"}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		msg, err := messages.Parse(body)
		if err != nil {
			if msg != nil {
				t.Fatalf("both a message (%#v) and an error (%v)", msg, err)
			}
			var pe *messages.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error is %T, not *ParseError: %v", err, err)
			}
			if !errors.Is(err, messages.ErrMalformed) && !errors.Is(err, messages.ErrMissingInstanceID) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		if msg == nil {
			t.Fatal("neither a message nor an error")
		}
		kind := msg.Kind()
		if !kind.Known() {
			t.Fatalf("unknown kind %q", kind)
		}
		ids := msg.EC2InstanceIDs()
		if kind.NeedsInstanceIDs() && len(ids) == 0 {
			t.Fatalf("%s message names no instance", kind)
		}
		for _, id := range ids {
			if !strings.HasPrefix(id, "i-") || len(id) < 3 {
				t.Fatalf("%s message names %q, not an instance id", kind, id)
			}
		}
	})
}
