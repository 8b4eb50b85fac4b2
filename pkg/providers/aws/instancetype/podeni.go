package instancetype

import (
	"bufio"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
)

// branchInterfacesTSV holds, for every instance type EC2 lists, how many
// branch network interfaces the VPC resource controller can attach (it
// advertises them as vpc.amazonaws.com/pod-eni for security groups for
// pods); 0 for types that are not trunking-compatible. EC2 does not publish
// this through DescribeInstanceTypes: ./gen writes the table from the VPC
// resource controller's pkg/aws/vpc/limits.go (what upstream Karpenter
// generates its own from) and the local AWS's instance-type data.
//
//go:generate go run ./gen -out branch_interfaces.tsv
//go:embed branch_interfaces.tsv
var branchInterfacesTSV string

var branchInterfaces = mustParseBranchInterfaces(branchInterfacesTSV)

func mustParseBranchInterfaces(tsv string) map[string]int64 {
	out := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(tsv))
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		name, count, ok := strings.Cut(text, "\t")
		n, err := strconv.ParseInt(strings.TrimSpace(count), 10, 64)
		if !ok || err != nil || n < 0 {
			panic(fmt.Sprintf("branch_interfaces.tsv line %d: want \"<type>\\t<count>\", got %q", line, text))
		}
		if _, dup := out[name]; dup {
			panic(fmt.Sprintf("branch_interfaces.tsv line %d: duplicate type %q", line, name))
		}
		out[name] = n
	}
	return out
}

// podENIs is the vpc.amazonaws.com/pod-eni capacity of a type.
func podENIs(instanceType string) int64 { return branchInterfaces[instanceType] }
