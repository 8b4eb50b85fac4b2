// Command gen writes the instancetype package's trunk-interface table
// (branch_interfaces.tsv): for every instance type EC2 lists, how many branch
// network interfaces the VPC resource controller attaches to it, which nodes
// advertise as vpc.amazonaws.com/pod-eni.
//
// EC2 does not publish branch-interface limits. The VPC resource controller
// (github.com/aws/amazon-vpc-resource-controller-k8s) ships them as a Go map
// in pkg/aws/vpc/limits.go, and upstream Karpenter generates its table from
// that file too. Its inputs:
//
//   - -limits: that limits.go (by default the one in the module cache of
//     the version -module names, found with `go mod download -json`);
//   - -types: the instance types EC2 lists, as a DescribeInstanceTypes
//     dump (a JSON object or array of records with InstanceType, optionally
//     gzipped; by default moto's ec2/resources/instance_types.json.gz, the
//     data the local AWS serves).
//
// Every type of either input gets a row: the controller's count when it
// marks the type trunking-compatible, 0 when it lists the type as not, and 0
// in a trailing section for types EC2 lists that the controller's table does
// not know (nothing attaches branch interfaces to them, as upstream).
//
//	go run ./gen -out branch_interfaces.tsv
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// defaultModule is the VPC resource controller release the table is
// generated from.
const defaultModule = "github.com/aws/amazon-vpc-resource-controller-k8s@v1.7.23"

func main() {
	module := flag.String("module", defaultModule, "the VPC resource controller module@version whose pkg/aws/vpc/limits.go is read when -limits is empty")
	limits := flag.String("limits", "", "path to the VPC resource controller's pkg/aws/vpc/limits.go")
	types := flag.String("types", "", "DescribeInstanceTypes records (JSON, optionally gzipped); moto's instance_types.json.gz when empty")
	out := flag.String("out", "branch_interfaces.tsv", "the table to write")
	flag.Parse()
	if err := run(*module, *limits, *types, *out); err != nil {
		fmt.Fprintln(os.Stderr, "branch interfaces gen:", err)
		os.Exit(1)
	}
}

func run(module, limitsPath, typesPath, out string) error {
	var err error
	if limitsPath == "" {
		if limitsPath, err = moduleFile(module, "pkg/aws/vpc/limits.go"); err != nil {
			return err
		}
	}
	if typesPath == "" {
		if typesPath, err = motoTypes(); err != nil {
			return err
		}
	}
	src, err := os.ReadFile(limitsPath)
	if err != nil {
		return fmt.Errorf("reading %s: %w", limitsPath, err)
	}
	limits, generatedAt, err := parseLimits(src)
	if err != nil {
		return fmt.Errorf("parsing %s: %w", limitsPath, err)
	}
	listed, err := readTypes(typesPath)
	if err != nil {
		return fmt.Errorf("reading %s: %w", typesPath, err)
	}
	table := render(limits, listed, module, generatedAt, filepath.Base(typesPath))
	if err := os.WriteFile(out, table, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	return nil
}

// limit is one entry of the controller's table.
type limit struct {
	trunking bool
	branches int64
}

var generatedRE = regexp.MustCompile(`generated at (\S+)`)

// parseLimits reads the Limits map literal of limits.go: per type its
// IsTrunkingCompatible and BranchInterface fields.
func parseLimits(src []byte) (map[string]limit, string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), "limits.go", src, parser.ParseComments)
	if err != nil {
		return nil, "", err
	}
	generatedAt := "unknown"
	if m := generatedRE.FindSubmatch(src); m != nil {
		generatedAt = string(m[1])
	}
	out := map[string]limit{}
	var walkErr error
	ast.Inspect(f, func(n ast.Node) bool {
		spec, ok := n.(*ast.ValueSpec)
		if !ok || len(spec.Names) != 1 || spec.Names[0].Name != "Limits" || len(spec.Values) != 1 {
			return true
		}
		lit, ok := spec.Values[0].(*ast.CompositeLit)
		if !ok {
			walkErr = errors.New("Limits is not a map literal")
			return false
		}
		for _, elt := range lit.Elts {
			kv, ok := elt.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			name, err := stringLit(kv.Key)
			if err != nil {
				walkErr = err
				return false
			}
			entry, ok := kv.Value.(*ast.CompositeLit)
			if !ok {
				walkErr = fmt.Errorf("%s: entry is not a struct literal", name)
				return false
			}
			var l limit
			for _, field := range entry.Elts {
				fkv, ok := field.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				key, _ := fkv.Key.(*ast.Ident)
				if key == nil {
					continue
				}
				switch key.Name {
				case "IsTrunkingCompatible":
					id, _ := fkv.Value.(*ast.Ident)
					l.trunking = id != nil && id.Name == "true"
				case "BranchInterface":
					bl, _ := fkv.Value.(*ast.BasicLit)
					if bl == nil {
						walkErr = fmt.Errorf("%s: BranchInterface is not a literal", name)
						return false
					}
					if l.branches, err = strconv.ParseInt(bl.Value, 10, 64); err != nil {
						walkErr = fmt.Errorf("%s: BranchInterface: %w", name, err)
						return false
					}
				}
			}
			if _, dup := out[name]; dup {
				walkErr = fmt.Errorf("duplicate type %s", name)
				return false
			}
			out[name] = l
		}
		return false
	})
	if walkErr != nil {
		return nil, "", walkErr
	}
	if len(out) == 0 {
		return nil, "", errors.New("no Limits map found")
	}
	return out, generatedAt, nil
}

func stringLit(e ast.Expr) (string, error) {
	bl, ok := e.(*ast.BasicLit)
	if !ok || bl.Kind != token.STRING {
		return "", fmt.Errorf("map key %v is not a string literal", e)
	}
	return strconv.Unquote(bl.Value)
}

// readTypes returns the instance type names of a DescribeInstanceTypes
// dump: a JSON object keyed by type (moto's file) or an array of records.
func readTypes(path string) ([]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if bytes.HasPrefix(raw, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, err
		}
		if raw, err = io.ReadAll(zr); err != nil {
			return nil, err
		}
	}
	var names []string
	var byName map[string]json.RawMessage
	if err := json.Unmarshal(raw, &byName); err == nil {
		for n := range byName {
			names = append(names, n)
		}
	} else {
		var records []struct{ InstanceType string }
		if err := json.Unmarshal(raw, &records); err != nil {
			return nil, fmt.Errorf("want a JSON object or array of DescribeInstanceTypes records: %w", err)
		}
		for _, r := range records {
			names = append(names, r.InstanceType)
		}
	}
	if len(names) == 0 {
		return nil, errors.New("no instance types")
	}
	sort.Strings(names)
	return names, nil
}

// render writes the table: the controller's types in name order, then the
// types only EC2 lists.
func render(limits map[string]limit, listed []string, module, generatedAt, typesName string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Branch network interfaces per EC2 instance type: the vpc.amazonaws.com/pod-eni\n")
	fmt.Fprintf(&b, "# capacity the VPC resource controller advertises for security groups for pods.\n")
	fmt.Fprintf(&b, "# Generated by ./gen from %s pkg/aws/vpc/limits.go\n", module)
	fmt.Fprintf(&b, "# (that table generated at %s) and the instance types of %s.\n", generatedAt, typesName)
	fmt.Fprintf(&b, "# 0 = not trunking-compatible. Format: <type>\\t<count>. Do not edit by hand.\n")
	names := make([]string, 0, len(limits))
	for n := range limits {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		count := int64(0)
		if l := limits[n]; l.trunking {
			count = l.branches
		}
		fmt.Fprintf(&b, "%s\t%d\n", n, count)
	}
	var unknown []string
	for _, n := range listed {
		if _, ok := limits[n]; !ok {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		fmt.Fprintf(&b, "# Listed by EC2, not by the VPC resource controller: nothing attaches branch\n")
		fmt.Fprintf(&b, "# interfaces to them until its table does.\n")
		for _, n := range unknown {
			fmt.Fprintf(&b, "%s\t0\n", n)
		}
	}
	return b.Bytes()
}

// moduleFile locates file in module's directory in the module cache,
// downloading the module through the Go module proxy if needed.
func moduleFile(module, file string) (string, error) {
	out, err := exec.Command("go", "mod", "download", "-json", module).Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w", module, err)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil {
		return "", fmt.Errorf("go mod download %s: %w", module, err)
	}
	if info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %s", module, info.Error)
	}
	return filepath.Join(info.Dir, file), nil
}

// motoTypes is moto's instance-type data, what the local AWS's
// DescribeInstanceTypes serves.
func motoTypes() (string, error) {
	out, err := exec.Command("python3", "-c", "import moto,os;print(os.path.dirname(moto.__file__))").Output()
	if err != nil {
		return "", fmt.Errorf("finding moto (pass -types instead): %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "ec2", "resources", "instance_types.json.gz"), nil
}
