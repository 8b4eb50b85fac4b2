package awslocal

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// eksVersions are the Kubernetes versions clusters were upgraded to with
// UpdateClusterVersion, which moto does not implement: the front records
// them and lays them over moto's DescribeCluster.
type eksVersions struct {
	mu      sync.Mutex
	version map[string]string // region/name -> version
}

// serveEKS answers the EKS calls moto lacks or gets wrong:
//
//	POST /clusters/{name}/updates   UpdateClusterVersion (one minor version up)
//	GET  /clusters/{name}           DescribeCluster, with the upgraded version
//
// and returns false for the rest, which go to moto.
func (f *front) serveEKS(ctx context.Context, w http.ResponseWriter, r *http.Request, c *call) bool {
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/clusters/")
	if !ok {
		return false
	}
	name, sub, _ := strings.Cut(rest, "/")
	name, err := url.PathUnescape(name)
	if err != nil {
		return false
	}
	switch {
	case r.Method == http.MethodPost && sub == "updates":
		f.updateClusterVersion(ctx, w, c, name)
		return true
	case r.Method == http.MethodGet && sub == "":
		f.describeCluster(ctx, w, c, name)
		return true
	}
	return false
}

// SetClusterVersion upgrades the EKS cluster record to version, as
// UpdateClusterVersion does once its update succeeds.
func (l *Local) SetClusterVersion(ctx context.Context, name, version string) error {
	c := &call{Service: "eks", Region: DefaultRegion, Protocol: protoREST}
	current, _, err := l.front.clusterVersion(ctx, c, name)
	if err != nil {
		return err
	}
	if err := nextMinor(current, version); err != nil {
		return err
	}
	l.front.setVersion(DefaultRegion, name, version)
	return nil
}

func (f *front) setVersion(region, name, version string) {
	f.eksVersions.mu.Lock()
	defer f.eksVersions.mu.Unlock()
	f.eksVersions.version[region+"/"+name] = version
}

// clusterVersion is the cluster's version and moto's DescribeCluster
// answer.
func (f *front) clusterVersion(ctx context.Context, c *call, name string) (string, map[string]any, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.moto.String()+"/clusters/"+url.PathEscape(name), nil)
	if err != nil {
		return "", nil, err
	}
	req.Header.Set("Authorization", fmt.Sprintf("AWS4-HMAC-SHA256 Credential=%s/20260101/%s/eks/aws4_request, SignedHeaders=host, Signature=0", AccessKeyID, c.Region))
	resp, err := f.client.Do(req)
	if err != nil {
		return "", nil, fmt.Errorf("describing EKS cluster %s: %w", name, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", nil, &eksError{status: resp.StatusCode, body: body}
	}
	var out map[string]any
	if err := json.Unmarshal(body, &out); err != nil {
		return "", nil, fmt.Errorf("describing EKS cluster %s: %w", name, err)
	}
	cluster, _ := out["cluster"].(map[string]any)
	if cluster == nil {
		return "", nil, fmt.Errorf("describing EKS cluster %s: no cluster in moto's answer", name)
	}
	version, _ := cluster["version"].(string)
	f.eksVersions.mu.Lock()
	if v, ok := f.eksVersions.version[c.Region+"/"+name]; ok {
		version = v
		cluster["version"] = v
	}
	f.eksVersions.mu.Unlock()
	return version, out, nil
}

// eksError is moto's own error answer, passed on unchanged.
type eksError struct {
	status int
	body   []byte
}

func (e *eksError) Error() string {
	return fmt.Sprintf("moto answered %d: %s", e.status, firstLine(e.body))
}

func (f *front) describeCluster(ctx context.Context, w http.ResponseWriter, c *call, name string) {
	_, out, err := f.clusterVersion(ctx, c, name)
	if err != nil {
		f.eksFail(w, c, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func (f *front) eksFail(w http.ResponseWriter, c *call, err error) {
	if me, ok := err.(*eksError); ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(me.status)
		_, _ = w.Write(me.body)
		return
	}
	writeError(w, c, http.StatusInternalServerError, "ServerException", err.Error())
}

// updateClusterVersion upgrades the record at once and answers with a
// Successful update: EKS takes minutes, which tests need not wait for.
func (f *front) updateClusterVersion(ctx context.Context, w http.ResponseWriter, c *call, name string) {
	var in struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(c.Body, &in); err != nil || in.Version == "" {
		writeError(w, c, http.StatusBadRequest, "InvalidParameterException", "version is required")
		return
	}
	current, _, err := f.clusterVersion(ctx, c, name)
	if err != nil {
		f.eksFail(w, c, err)
		return
	}
	if err := nextMinor(current, in.Version); err != nil {
		writeError(w, c, http.StatusBadRequest, "InvalidParameterException", err.Error())
		return
	}
	f.setVersion(c.Region, name, in.Version)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"update": map[string]any{
		"id": uuid.NewString(), "status": "Successful", "type": "VersionUpdate",
		"params":    []map[string]string{{"type": "Version", "value": in.Version}, {"type": "PlatformVersion", "value": "eks.1"}},
		"createdAt": float64(time.Now().UnixMilli()) / 1000, "errors": []any{},
	}})
}

// nextMinor accepts only an upgrade by one minor version, as EKS does.
func nextMinor(current, next string) error {
	parse := func(v string) (int, int, bool) {
		maj, min, ok := strings.Cut(v, ".")
		a, err1 := strconv.Atoi(maj)
		b, err2 := strconv.Atoi(min)
		return a, b, ok && err1 == nil && err2 == nil
	}
	cm, cn, ok1 := parse(current)
	nm, nn, ok2 := parse(next)
	if !ok1 || !ok2 || nm != cm || nn != cn+1 {
		return fmt.Errorf("unsupported Kubernetes version update from %s to %s: only the next minor version is allowed", current, next)
	}
	return nil
}
