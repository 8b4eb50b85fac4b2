package awslocal

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// arcService is the SigV4 signing name of Amazon Application Recovery
// Controller's zonal shift API (REST-JSON). moto does not implement it; the
// front owns the whole service.
const arcService = "arc-zonal-shift"

// ZonalShift is one zonal shift, as ARC reports it.
type ZonalShift struct {
	ID                 string    `json:"zonalShiftId"`
	ResourceIdentifier string    `json:"resourceIdentifier"`
	AwayFrom           string    `json:"awayFrom"`
	Comment            string    `json:"comment"`
	StartTime          time.Time `json:"startTime"`
	ExpiryTime         time.Time `json:"expiryTime"`
	// Status is ACTIVE, EXPIRED or CANCELED.
	Status string `json:"status"`
}

// Autoshift is an ARC-started shift away from a zone of the region; it
// applies to every managed resource with zonal autoshift enabled.
type Autoshift struct {
	AwayFrom  string    `json:"awayFrom"`
	StartTime time.Time `json:"startTime"`
	EndTime   time.Time `json:"endTime,omitzero"`
	// Status is ACTIVE or COMPLETED.
	Status string `json:"status"`
}

// arcState is what the front keeps for ARC: the managed resources (EKS
// clusters registered for zonal shift), their shifts and the region's
// autoshifts.
type arcState struct {
	mu        sync.Mutex
	resources map[string]*managedResource // by ARN
	shifts    []*ZonalShift
	autoshift map[string][]*Autoshift // by region
	now       func() time.Time
}

type managedResource struct {
	arn, name, region string
	autoshift         bool
}

func newARCState() *arcState {
	return &arcState{resources: map[string]*managedResource{}, autoshift: map[string][]*Autoshift{}, now: time.Now}
}

// expireLocked moves zonal shifts past their expiry to EXPIRED.
func (s *arcState) expireLocked() {
	now := s.now()
	for _, z := range s.shifts {
		if z.Status == "ACTIVE" && !z.ExpiryTime.After(now) {
			z.Status = "EXPIRED"
		}
	}
}

// EnableZonalShift registers the EKS cluster as an ARC managed resource,
// as turning on zonal shift in its EKS configuration does, and returns its
// ARN. autoshift also opts it into zonal autoshift.
func (l *Local) EnableZonalShift(ctx context.Context, clusterName string, autoshift bool) (string, error) {
	return l.front.enableZonalShift(ctx, DefaultRegion, clusterName, autoshift)
}

func (f *front) enableZonalShift(ctx context.Context, region, clusterName string, autoshift bool) (string, error) {
	arn, err := f.eksClusterARN(ctx, region, clusterName)
	if err != nil {
		return "", err
	}
	s := f.arc
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resources[arn] = &managedResource{arn: arn, name: clusterName, region: region, autoshift: autoshift}
	return arn, nil
}

// StartZonalShift shifts the managed resource away from a zone ID for
// expiresIn, as ARC's StartZonalShift does.
func (l *Local) StartZonalShift(ctx context.Context, resourceARN, awayFrom string, expiresIn time.Duration) (ZonalShift, error) {
	z, _, err := l.front.startZonalShift(ctx, resourceARN, awayFrom, expiresIn, "awslocal")
	return z, err
}

// CancelZonalShift ends a zonal shift.
func (l *Local) CancelZonalShift(id string) (ZonalShift, error) {
	z, _, err := l.front.cancelZonalShift(id)
	return z, err
}

// StartAutoshift makes ARC shift the region's autoshift-enabled resources
// away from a zone ID until EndAutoshift.
func (l *Local) StartAutoshift(ctx context.Context, awayFrom string) error {
	if err := l.front.checkZoneID(ctx, DefaultRegion, awayFrom); err != nil {
		return err
	}
	s := l.front.arc
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.autoshift[DefaultRegion] {
		if a.AwayFrom == awayFrom && a.Status == "ACTIVE" {
			return nil
		}
	}
	s.autoshift[DefaultRegion] = append(s.autoshift[DefaultRegion], &Autoshift{AwayFrom: awayFrom, StartTime: s.now(), Status: "ACTIVE"})
	return nil
}

// EndAutoshift completes the region's active autoshift away from a zone ID.
func (l *Local) EndAutoshift(awayFrom string) {
	s := l.front.arc
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.autoshift[DefaultRegion] {
		if a.AwayFrom == awayFrom && a.Status == "ACTIVE" {
			a.Status, a.EndTime = "COMPLETED", s.now()
		}
	}
}

// arcError is an ARC error: its HTTP status and code.
type arcError struct {
	status int
	code   string
	msg    string
}

func (e *arcError) Error() string { return e.code + ": " + e.msg }

func arcValidation(format string, args ...any) *arcError {
	return &arcError{http.StatusBadRequest, "ValidationException", fmt.Sprintf(format, args...)}
}

func arcNotFound(format string, args ...any) *arcError {
	return &arcError{http.StatusNotFound, "ResourceNotFoundException", fmt.Sprintf(format, args...)}
}

func (f *front) checkZoneID(ctx context.Context, region, zoneID string) error {
	zones, err := f.regionZones(ctx, region)
	if err != nil {
		return err
	}
	for _, z := range zones {
		if z.ID == zoneID {
			return nil
		}
	}
	return arcValidation("awayFrom %q is not an Availability Zone ID of %s", zoneID, region)
}

func (f *front) startZonalShift(ctx context.Context, resourceARN, awayFrom string, expiresIn time.Duration, comment string) (ZonalShift, int, error) {
	s := f.arc
	s.mu.Lock()
	res := s.resources[resourceARN]
	s.mu.Unlock()
	if res == nil {
		return ZonalShift{}, 0, arcNotFound("resource %s is not registered for zonal shift", resourceARN)
	}
	if err := f.checkZoneID(ctx, res.region, awayFrom); err != nil {
		return ZonalShift{}, 0, err
	}
	// ARC's bounds: a shift lasts at least a minute and at most three days.
	if expiresIn < time.Minute || expiresIn > 72*time.Hour {
		return ZonalShift{}, 0, arcValidation("expiresIn must be between 1m and 72h, got %s", expiresIn)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked()
	for _, z := range s.shifts {
		if z.ResourceIdentifier == resourceARN && z.Status == "ACTIVE" {
			return ZonalShift{}, 0, &arcError{http.StatusConflict, "ConflictException", fmt.Sprintf("zonal shift %s is already active for %s", z.ID, resourceARN)}
		}
	}
	now := s.now()
	z := &ZonalShift{ID: uuid.NewString(), ResourceIdentifier: resourceARN, AwayFrom: awayFrom, Comment: comment,
		StartTime: now, ExpiryTime: now.Add(expiresIn), Status: "ACTIVE"}
	s.shifts = append(s.shifts, z)
	return *z, http.StatusCreated, nil
}

func (f *front) cancelZonalShift(id string) (ZonalShift, int, error) {
	s := f.arc
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked()
	for _, z := range s.shifts {
		if z.ID == id {
			if z.Status != "ACTIVE" {
				return ZonalShift{}, 0, &arcError{http.StatusConflict, "ConflictException", fmt.Sprintf("zonal shift %s is %s", id, z.Status)}
			}
			z.Status = "CANCELED"
			return *z, http.StatusOK, nil
		}
	}
	return ZonalShift{}, 0, arcNotFound("no zonal shift %s", id)
}

// serveARC answers every call of the zonal shift API:
//
//	GET    /managedresources/{resourceIdentifier}  GetManagedResource
//	PUT    /managedresources/{resourceIdentifier}  UpdateZonalAutoshiftConfiguration
//	GET    /managedresources                       ListManagedResources
//	GET    /zonalshifts                            ListZonalShifts
//	POST   /zonalshifts                            StartZonalShift
//	DELETE /zonalshifts/{zonalShiftId}             CancelZonalShift
//	GET    /autoshifts                             ListAutoshifts
func (f *front) serveARC(ctx context.Context, w http.ResponseWriter, r *http.Request, c *call) {
	path := r.URL.EscapedPath()
	q := r.URL.Query()
	var out any
	status := http.StatusOK
	var err error
	switch {
	case strings.HasPrefix(path, "/managedresources/"):
		id, uerr := url.PathUnescape(strings.TrimPrefix(path, "/managedresources/"))
		if uerr != nil {
			err = arcValidation("resourceIdentifier: %v", uerr)
			break
		}
		switch r.Method {
		case http.MethodGet:
			out, err = f.getManagedResource(ctx, id)
		case http.MethodPut:
			out, err = f.updateAutoshift(id, c.Body)
		default:
			err = arcValidation("%s %s is not an ARC operation", r.Method, path)
		}
	case path == "/managedresources" && r.Method == http.MethodGet:
		out = f.listManagedResources(c.Region)
	case path == "/zonalshifts" && r.Method == http.MethodGet:
		out, err = f.listZonalShifts(q)
	case path == "/zonalshifts" && r.Method == http.MethodPost:
		var in struct {
			ResourceIdentifier string `json:"resourceIdentifier"`
			AwayFrom           string `json:"awayFrom"`
			ExpiresIn          string `json:"expiresIn"`
			Comment            string `json:"comment"`
		}
		if jerr := json.Unmarshal(c.Body, &in); jerr != nil {
			err = arcValidation("request body: %v", jerr)
			break
		}
		d, derr := parseExpiresIn(in.ExpiresIn)
		if derr != nil {
			err = derr
			break
		}
		var z ZonalShift
		z, status, err = f.startZonalShift(ctx, in.ResourceIdentifier, in.AwayFrom, d, in.Comment)
		out = arcShiftJSON(z)
	case strings.HasPrefix(path, "/zonalshifts/") && r.Method == http.MethodDelete:
		var z ZonalShift
		z, status, err = f.cancelZonalShift(strings.TrimPrefix(path, "/zonalshifts/"))
		out = arcShiftJSON(z)
	case path == "/autoshifts" && r.Method == http.MethodGet:
		out = f.listAutoshifts(c.Region, q.Get("status"))
	default:
		err = arcValidation("%s %s is not an ARC operation the local AWS serves", r.Method, path)
	}
	if err != nil {
		ae, ok := err.(*arcError)
		if !ok {
			ae = &arcError{http.StatusInternalServerError, "InternalServerException", err.Error()}
		}
		writeError(w, c, ae.status, ae.code, ae.msg)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-Requestid", uuid.NewString())
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(out)
}

// parseExpiresIn reads ARC's "<n>m" or "<n>h".
func parseExpiresIn(s string) (time.Duration, error) {
	if len(s) < 2 || (s[len(s)-1] != 'm' && s[len(s)-1] != 'h') {
		return 0, arcValidation("expiresIn %q: want <number>m or <number>h", s)
	}
	n, err := strconv.Atoi(s[:len(s)-1])
	if err != nil || n <= 0 {
		return 0, arcValidation("expiresIn %q: want <number>m or <number>h", s)
	}
	if s[len(s)-1] == 'h' {
		return time.Duration(n) * time.Hour, nil
	}
	return time.Duration(n) * time.Minute, nil
}

// epoch renders a time as REST-JSON's default timestamp: epoch seconds.
func epoch(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }

func arcShiftJSON(z ZonalShift) map[string]any {
	return map[string]any{
		"zonalShiftId": z.ID, "resourceIdentifier": z.ResourceIdentifier, "awayFrom": z.AwayFrom,
		"comment": z.Comment, "startTime": epoch(z.StartTime), "expiryTime": epoch(z.ExpiryTime),
		"status": z.Status, "shiftType": "ZONAL_SHIFT",
	}
}

func (f *front) getManagedResource(ctx context.Context, id string) (any, error) {
	s := f.arc
	s.mu.Lock()
	res := s.resources[id]
	if res == nil {
		for _, r := range s.resources {
			if r.name == id {
				res = r
			}
		}
	}
	s.mu.Unlock()
	if res == nil {
		return nil, arcNotFound("resource %s is not registered for zonal shift", id)
	}
	zones, err := f.regionZones(ctx, res.region)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked()
	zonal := []map[string]any{}
	shifted := map[string]bool{}
	for _, z := range s.shifts {
		if z.ResourceIdentifier == res.arn && z.Status == "ACTIVE" {
			zonal = append(zonal, map[string]any{
				"zonalShiftId": z.ID, "resourceIdentifier": z.ResourceIdentifier, "awayFrom": z.AwayFrom,
				"comment": z.Comment, "startTime": epoch(z.StartTime), "expiryTime": epoch(z.ExpiryTime),
				"appliedStatus": "APPLIED", "shiftType": "ZONAL_SHIFT",
			})
			shifted[z.AwayFrom] = true
		}
	}
	autos := []map[string]any{}
	if res.autoshift {
		for _, a := range s.autoshift[res.region] {
			if a.Status == "ACTIVE" {
				autos = append(autos, map[string]any{"awayFrom": a.AwayFrom, "startTime": epoch(a.StartTime), "appliedStatus": "APPLIED"})
				shifted[a.AwayFrom] = true
			}
		}
	}
	weights := map[string]float64{}
	for _, z := range zones {
		weights[z.ID] = 1
		if shifted[z.ID] {
			weights[z.ID] = 0
		}
	}
	status := "DISABLED"
	if res.autoshift {
		status = "ENABLED"
	}
	return map[string]any{
		"arn": res.arn, "name": res.name, "appliedWeights": weights, "zonalShifts": zonal,
		"autoshifts": autos, "zonalAutoshiftStatus": status,
	}, nil
}

func (f *front) updateAutoshift(id string, body []byte) (any, error) {
	var in struct {
		ZonalAutoshiftStatus string `json:"zonalAutoshiftStatus"`
	}
	if err := json.Unmarshal(body, &in); err != nil || (in.ZonalAutoshiftStatus != "ENABLED" && in.ZonalAutoshiftStatus != "DISABLED") {
		return nil, arcValidation("zonalAutoshiftStatus must be ENABLED or DISABLED")
	}
	s := f.arc
	s.mu.Lock()
	defer s.mu.Unlock()
	res := s.resources[id]
	if res == nil {
		return nil, arcNotFound("resource %s is not registered for zonal shift", id)
	}
	res.autoshift = in.ZonalAutoshiftStatus == "ENABLED"
	return map[string]any{"resourceIdentifier": res.arn, "zonalAutoshiftStatus": in.ZonalAutoshiftStatus}, nil
}

func (f *front) listManagedResources(region string) any {
	s := f.arc
	s.mu.Lock()
	defer s.mu.Unlock()
	items := []map[string]any{}
	arns := make([]string, 0, len(s.resources))
	for arn, r := range s.resources {
		if r.region == region {
			arns = append(arns, arn)
		}
	}
	sort.Strings(arns)
	for _, arn := range arns {
		r := s.resources[arn]
		status := "DISABLED"
		if r.autoshift {
			status = "ENABLED"
		}
		items = append(items, map[string]any{"arn": r.arn, "name": r.name, "zonalAutoshiftStatus": status})
	}
	return map[string]any{"items": items}
}

// listZonalShifts pages ListZonalShifts (maxResults 1..100, default 100;
// nextToken is the index to resume at).
func (f *front) listZonalShifts(q url.Values) (any, error) {
	limit := 100
	if v := q.Get("maxResults"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return nil, arcValidation("maxResults must be between 1 and 100")
		}
		limit = n
	}
	start := 0
	if v := q.Get("nextToken"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, arcValidation("invalid nextToken")
		}
		start = n
	}
	s := f.arc
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked()
	var matched []map[string]any
	for _, z := range s.shifts {
		if st := q.Get("status"); st != "" && z.Status != st {
			continue
		}
		if rid := q.Get("resourceIdentifier"); rid != "" && z.ResourceIdentifier != rid {
			continue
		}
		matched = append(matched, arcShiftJSON(*z))
	}
	out := map[string]any{"items": []map[string]any{}}
	if start < len(matched) {
		end := min(start+limit, len(matched))
		out["items"] = matched[start:end]
		if end < len(matched) {
			out["nextToken"] = strconv.Itoa(end)
		}
	}
	return out, nil
}

func (f *front) listAutoshifts(region, status string) any {
	s := f.arc
	s.mu.Lock()
	defer s.mu.Unlock()
	items := []map[string]any{}
	for _, a := range s.autoshift[region] {
		if status != "" && a.Status != status {
			continue
		}
		item := map[string]any{"awayFrom": a.AwayFrom, "startTime": epoch(a.StartTime), "status": a.Status}
		if !a.EndTime.IsZero() {
			item["endTime"] = epoch(a.EndTime)
		}
		items = append(items, item)
	}
	return map[string]any{"items": items}
}

// eksClusterARN asks moto's EKS for a cluster's ARN.
func (f *front) eksClusterARN(ctx context.Context, region, name string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.moto.String()+"/clusters/"+url.PathEscape(name), nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", fmt.Sprintf("AWS4-HMAC-SHA256 Credential=%s/20260101/%s/eks/aws4_request, SignedHeaders=host, Signature=0", AccessKeyID, region))
	resp, err := f.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("describing EKS cluster %s: %w", name, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("describing EKS cluster %s: moto answered %d: %s", name, resp.StatusCode, firstLine(body))
	}
	var out struct {
		Cluster struct {
			Arn string `json:"arn"`
		} `json:"cluster"`
	}
	if err := json.Unmarshal(body, &out); err != nil || out.Cluster.Arn == "" {
		return "", fmt.Errorf("describing EKS cluster %s: no ARN in %s", name, firstLine(body))
	}
	return out.Cluster.Arn, nil
}

// controlARC serves the control API's zonal-shift routes:
//
//	POST   /_awslocal/zonal-shift/resources  {"clusterName","autoshift"}  register (201 with its arn)
//	POST   /_awslocal/zonal-shifts           {"resourceArn","awayFrom","expiresIn"}  start (201)
//	DELETE /_awslocal/zonal-shifts?id=       cancel
//	POST   /_awslocal/autoshifts             {"awayFrom"}  start an autoshift
//	DELETE /_awslocal/autoshifts?awayFrom=   end it
func (f *front) controlARC(w http.ResponseWriter, r *http.Request, route string) bool {
	l := &Local{front: f}
	bad := func(err error) { reply(w, http.StatusBadRequest, map[string]string{"error": err.Error()}) }
	switch route {
	case "POST zonal-shift/resources":
		var in struct {
			ClusterName string `json:"clusterName"`
			Autoshift   bool   `json:"autoshift"`
		}
		if !decode(w, r, &in) {
			return true
		}
		arn, err := l.EnableZonalShift(r.Context(), in.ClusterName, in.Autoshift)
		if err != nil {
			bad(err)
			return true
		}
		reply(w, http.StatusCreated, map[string]string{"arn": arn})
	case "POST zonal-shifts":
		var in struct {
			ResourceARN string `json:"resourceArn"`
			AwayFrom    string `json:"awayFrom"`
			ExpiresIn   string `json:"expiresIn"`
		}
		if !decode(w, r, &in) {
			return true
		}
		d, err := time.ParseDuration(in.ExpiresIn)
		if err != nil {
			bad(err)
			return true
		}
		z, err := l.StartZonalShift(r.Context(), in.ResourceARN, in.AwayFrom, d)
		if err != nil {
			bad(err)
			return true
		}
		reply(w, http.StatusCreated, z)
	case "DELETE zonal-shifts":
		z, err := l.CancelZonalShift(r.URL.Query().Get("id"))
		if err != nil {
			bad(err)
			return true
		}
		reply(w, http.StatusOK, z)
	case "POST autoshifts":
		var in struct {
			AwayFrom string `json:"awayFrom"`
		}
		if !decode(w, r, &in) {
			return true
		}
		if err := l.StartAutoshift(r.Context(), in.AwayFrom); err != nil {
			bad(err)
			return true
		}
		reply(w, http.StatusCreated, map[string]string{"awayFrom": in.AwayFrom})
	case "DELETE autoshifts":
		l.EndAutoshift(r.URL.Query().Get("awayFrom"))
		reply(w, http.StatusOK, map[string]string{})
	default:
		return false
	}
	return true
}
