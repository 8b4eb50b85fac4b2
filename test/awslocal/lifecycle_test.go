package awslocal_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/test/awslocal"
)

func TestStartNamesMotoWhenItIsMissing(t *testing.T) {
	_, err := awslocal.Start(context.Background(), awslocal.Options{MotoServer: filepath.Join(t.TempDir(), "moto_server")})
	require.Error(t, err)
	require.Contains(t, err.Error(), "pip install 'moto[server]'")

	t.Setenv("PATH", t.TempDir())
	_, err = awslocal.Start(context.Background(), awslocal.Options{})
	require.ErrorContains(t, err, "moto_server (the moto AWS emulator) is not on PATH")
}

func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// A zombie (state Z after the command name) is dead too.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func TestStopKillsMoto(t *testing.T) {
	l, err := awslocal.Start(context.Background(), awslocal.Options{KubernetesVersions: []string{"1.36"}})
	require.NoError(t, err)
	pid := l.MotoPID()
	require.True(t, alive(pid))
	l.Stop()
	require.False(t, alive(pid), "moto outlived Stop")
	l.Stop() // twice is harmless
}

func TestControlAPIOverHTTP(t *testing.T) {
	ctx := context.Background()
	post := func(path string, v any) *http.Response {
		b, _ := json.Marshal(v)
		resp, err := http.Post(local.Endpoint()+"/_awslocal/"+path, "application/json", bytes.NewReader(b))
		require.NoError(t, err)
		return resp
	}
	resp := post("faults", map[string]any{"service": "ec2", "action": "DescribeKeyPairs", "kind": "throttle", "count": 5})
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	t.Cleanup(func() { local.ClearFaults("", "") })
	_, err := ec2Client(t).DescribeKeyPairs(ctx, &ec2.DescribeKeyPairsInput{})
	require.Equal(t, "RequestLimitExceeded", apiCode(t, err))

	req, _ := http.NewRequest(http.MethodDelete, local.Endpoint()+"/_awslocal/faults?service=ec2", nil)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	var cleared map[string]int
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&cleared))
	resp.Body.Close()
	require.Equal(t, 1, cleared["cleared"])
	_, err = ec2Client(t).DescribeKeyPairs(ctx, &ec2.DescribeKeyPairsInput{})
	require.NoError(t, err)

	resp = post("faults", map[string]any{"kind": "latency", "latency": "soon"})
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)

	resp = post("images/publish", awslocal.Series{Family: awslocal.FamilyWindows2022, KubernetesVersion: "1.36", Arch: "x86_64"})
	var img awslocal.Image
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&img))
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, img.ID, getParameter(t, "/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.36/image_id"))

	req, _ = http.NewRequest(http.MethodPut, local.Endpoint()+"/_awslocal/spot-prices", strings.NewReader(`{"zone":"us-east-1b","instanceType":"c5.xlarge","price":0.05}`))
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	t.Cleanup(local.ClearSpotPrices)
	out, err := ec2Client(t).DescribeSpotPriceHistory(ctx, &ec2.DescribeSpotPriceHistoryInput{InstanceTypes: []ec2types.InstanceType{"c5.xlarge"}, AvailabilityZone: aws.String("us-east-1b"), ProductDescriptions: []string{"Linux/UNIX (Amazon VPC)"}})
	require.NoError(t, err)
	require.Len(t, out.SpotPriceHistory, 1)
	require.Equal(t, "0.050000", *out.SpotPriceHistory[0].SpotPrice)
}

// The standalone binary starts, prints an endpoint the SDK can use, and
// takes moto down with it on SIGTERM.
func TestHackBinarySmoke(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "awslocal")
	build := exec.Command("go", "build", "-o", bin, "../../hack/awslocal")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())

	dir := t.TempDir()
	cmd := exec.Command(bin, "-dir", dir, "-kubernetes-versions", "1.36")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	endpoint, ok := strings.CutPrefix(strings.TrimSpace(line), "endpoint=")
	require.True(t, ok, line)

	cfg := local.Config(context.Background())
	cfg.BaseEndpoint = aws.String(endpoint)
	out, err := ec2.NewFromConfig(cfg).DescribeAvailabilityZones(context.Background(), &ec2.DescribeAvailabilityZonesInput{})
	require.NoError(t, err)
	require.NotEmpty(t, out.AvailabilityZones)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("awslocal did not exit on SIGTERM")
	}
	_, err = http.Get(endpoint + "/_awslocal/faults")
	require.Error(t, err, "the front is gone")
}
