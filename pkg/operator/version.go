package operator

// Version and Commit identify the build; `go build -ldflags "-X
// github.com/karpenter-go/karpenter/pkg/operator.Version=v1.2.3 -X
// ...operator.Commit=abc1234"` sets them. They label karpenter_build_info,
// the user agent and every log line.
var (
	Version = "dev"
	Commit  = "unknown"
)
