package instancetype

import (
	"compress/gzip"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestTestdataMatchesMoto checks that testdata/instance_types.json holds
// moto's records unchanged, when moto is installed (CI without Python skips).
// The vectors were computed from moto's file, so an edited copy would make
// the table test compare against the wrong inputs.
func TestTestdataMatchesMoto(t *testing.T) {
	out, err := exec.Command("python3", "-c", "import moto,os;print(os.path.dirname(moto.__file__))").Output()
	if err != nil {
		t.Skipf("moto not installed (%v); testdata is checked against the vectors' inputs table only", err)
	}
	f, err := os.Open(filepath.Join(strings.TrimSpace(string(out)), "ec2", "resources", "instance_types.json.gz"))
	if err != nil {
		t.Skipf("moto has no instance_types.json.gz: %v", err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var moto map[string]any
	if err := json.NewDecoder(gz).Decode(&moto); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("testdata/instance_types.json")
	if err != nil {
		t.Fatal(err)
	}
	var ours []map[string]any
	if err := json.Unmarshal(raw, &ours); err != nil {
		t.Fatal(err)
	}
	for _, rec := range ours {
		name, _ := rec["InstanceType"].(string)
		if !reflect.DeepEqual(rec, moto[name]) {
			t.Errorf("testdata record %s differs from moto's", name)
		}
	}
}
