package awslocal

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"strings"
)

// Roots of the public parameter trees moto has nothing under; a path there
// is answered from the catalog alone. Windows' ami-windows-latest tree is
// shared with moto's own (non-EKS) Windows parameters.
var ownedRoots = []string{"/aws/service/eks/optimized-ami", "/aws/service/bottlerocket"}

type ssmParameter struct {
	Name             string  `json:"Name"`
	Type             string  `json:"Type"`
	Value            string  `json:"Value"`
	Version          int     `json:"Version"`
	LastModifiedDate float64 `json:"LastModifiedDate"`
	ARN              string  `json:"ARN"`
	DataType         string  `json:"DataType"`
}

func (p param) wire(region string) ssmParameter {
	return ssmParameter{
		Name:             p.Name,
		Type:             "String",
		Value:            p.Value,
		Version:          p.Version,
		LastModifiedDate: float64(p.Modified.UnixMilli()) / 1000,
		// Public parameters belong to no account.
		ARN:      "arn:aws:ssm:" + region + "::parameter" + p.Name,
		DataType: "aws:ec2:image",
	}
}

func (f *front) ssmGetParameter(_ context.Context, w http.ResponseWriter, c *call) bool {
	var in struct {
		Name string `json:"Name"`
	}
	if json.Unmarshal(c.Body, &in) != nil {
		return false
	}
	p, ok := f.catalog.lookup(in.Name)
	if !ok {
		return false
	}
	writeJSON(w, c, map[string]any{"Parameter": p.wire(c.Region)})
	return true
}

func (f *front) ssmGetParameters(ctx context.Context, w http.ResponseWriter, c *call) bool {
	var in map[string]any
	if json.Unmarshal(c.Body, &in) != nil {
		return false
	}
	raw, _ := in["Names"].([]any)
	var ours []ssmParameter
	var rest []any
	for _, n := range raw {
		name, _ := n.(string)
		if p, ok := f.catalog.lookup(name); ok {
			ours = append(ours, p.wire(c.Region))
		} else {
			rest = append(rest, n)
		}
	}
	if len(ours) == 0 {
		return false
	}
	out := map[string]any{"Parameters": ours, "InvalidParameters": []string{}}
	if len(rest) > 0 {
		// moto answers the names the catalog does not know.
		in["Names"] = rest
		body, _ := json.Marshal(in)
		status, resp, err := f.motoJSON(ctx, c, body)
		if err != nil || status != http.StatusOK {
			writeError(w, c, http.StatusInternalServerError, "InternalServerError", "moto failed GetParameters for the names the local AWS does not own")
			return true
		}
		var theirs struct {
			Parameters        []json.RawMessage `json:"Parameters"`
			InvalidParameters []string          `json:"InvalidParameters"`
		}
		if err := json.Unmarshal(resp, &theirs); err != nil {
			writeError(w, c, http.StatusInternalServerError, "InternalServerError", "parsing moto's GetParameters: "+err.Error())
			return true
		}
		merged := make([]any, 0, len(ours)+len(theirs.Parameters))
		for _, p := range ours {
			merged = append(merged, p)
		}
		for _, p := range theirs.Parameters {
			merged = append(merged, p)
		}
		out["Parameters"] = merged
		if theirs.InvalidParameters != nil {
			out["InvalidParameters"] = theirs.InvalidParameters
		}
	}
	writeJSON(w, c, out)
	return true
}

func (f *front) ssmGetParametersByPath(ctx context.Context, w http.ResponseWriter, c *call) bool {
	var in struct {
		Path       string `json:"Path"`
		Recursive  bool   `json:"Recursive"`
		MaxResults int    `json:"MaxResults"`
		NextToken  string `json:"NextToken"`
	}
	if json.Unmarshal(c.Body, &in) != nil {
		return false
	}
	path := strings.TrimSuffix(in.Path, "/")
	var matched []any
	for _, p := range f.catalog.params() {
		rest, ok := strings.CutPrefix(p.Name, path+"/")
		if !ok || (!in.Recursive && strings.Contains(rest, "/")) {
			continue
		}
		matched = append(matched, p.wire(c.Region))
	}
	owned := false
	for _, root := range ownedRoots {
		if path == root || strings.HasPrefix(path, root+"/") {
			owned = true
		}
	}
	if len(matched) == 0 && !owned {
		return false
	}
	if !owned {
		theirs, err := f.motoParametersByPath(ctx, c, in.Path, in.Recursive)
		if err != nil {
			writeError(w, c, http.StatusInternalServerError, "InternalServerError", err.Error())
			return true
		}
		matched = append(matched, theirs...)
		sort.SliceStable(matched, func(i, j int) bool { return paramName(matched[i]) < paramName(matched[j]) })
	}
	size := 10
	if in.MaxResults != 0 {
		if in.MaxResults < 1 || in.MaxResults > 10 {
			writeError(w, c, http.StatusBadRequest, "ValidationException", "1 validation error detected: Value at 'maxResults' failed to satisfy constraint: Member must have value less than or equal to 10")
			return true
		}
		size = in.MaxResults
	}
	start := 0
	if in.NextToken != "" {
		n, err := decodeToken(in.NextToken, "GetParametersByPath")
		if err != nil {
			writeError(w, c, http.StatusBadRequest, "InvalidNextToken", "The specified token is not valid.")
			return true
		}
		start = min(n, len(matched))
	}
	end := min(start+size, len(matched))
	out := map[string]any{"Parameters": matched[start:end]}
	if end < len(matched) {
		out["NextToken"] = encodeToken(end, "GetParametersByPath")
	}
	writeJSON(w, c, out)
	return true
}

func paramName(p any) string {
	switch v := p.(type) {
	case ssmParameter:
		return v.Name
	case json.RawMessage:
		var n struct{ Name string }
		_ = json.Unmarshal(v, &n)
		return n.Name
	}
	return ""
}

// motoParametersByPath reads every page of moto's answer for a path.
func (f *front) motoParametersByPath(ctx context.Context, c *call, path string, recursive bool) ([]any, error) {
	var out []any
	token := ""
	for {
		req := map[string]any{"Path": path, "Recursive": recursive, "MaxResults": 10}
		if token != "" {
			req["NextToken"] = token
		}
		body, _ := json.Marshal(req)
		status, resp, err := f.motoJSON(ctx, c, body)
		if err != nil {
			return nil, err
		}
		if status != http.StatusOK {
			return nil, &motoStatusError{action: c.Action, status: status, body: firstLine(resp)}
		}
		var page struct {
			Parameters []json.RawMessage `json:"Parameters"`
			NextToken  string            `json:"NextToken"`
		}
		if err := json.Unmarshal(resp, &page); err != nil {
			return nil, err
		}
		for _, p := range page.Parameters {
			out = append(out, p)
		}
		if page.NextToken == "" {
			return out, nil
		}
		token = page.NextToken
	}
}
