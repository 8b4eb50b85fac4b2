package instancetype

import (
	"compress/gzip"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestBranchInterfacesCoverEveryListedType checks that every instance type
// the local AWS's DescribeInstanceTypes lists (moto's instance-type data)
// has a row in the trunk-interface table, so no type silently gets no
// pod-eni because the table is stale. It needs moto, which the AWS tests
// need anyway; without it the test skips.
func TestBranchInterfacesCoverEveryListedType(t *testing.T) {
	out, err := exec.Command("python3", "-c", "import moto,os;print(os.path.dirname(moto.__file__))").Output()
	if err != nil {
		t.Skipf("moto not installed (%v)", err)
	}
	f, err := os.Open(filepath.Join(strings.TrimSpace(string(out)), "ec2", "resources", "instance_types.json.gz"))
	if err != nil {
		t.Fatalf("moto's instance types: %v", err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var listed map[string]json.RawMessage
	if err := json.NewDecoder(gz).Decode(&listed); err != nil {
		t.Fatal(err)
	}
	if len(listed) < 1000 {
		t.Fatalf("moto lists %d instance types; want its full catalog", len(listed))
	}
	var missing []string
	for name := range listed {
		if _, ok := branchInterfaces[name]; !ok {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%d instance types EC2 lists have no row in branch_interfaces.tsv (run go generate): %v", len(missing), missing)
	}
}
