package awslocal

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

//go:embed testdata/on-demand-prices-us-east-1.tsv
var onDemandTSV []byte

// region is a region the Pricing API knows, with the factor its on-demand
// prices carry over us-east-1. AWS publishes every region's list prices;
// the shared table has us-east-1 only, so the other regions are us-east-1
// times a fixed factor close to the typical regional premium for general
// purpose instances. Regions not listed here have no products.
type region struct {
	Code     string
	Location string
	Prefix   string // usagetype prefix, "" for us-east-1
	Factor   float64
}

// RegionFactors are the regions GetProducts serves and their factor.
var RegionFactors = []region{
	{"us-east-1", "US East (N. Virginia)", "", 1.00},
	{"us-east-2", "US East (Ohio)", "USE2-", 1.00},
	{"us-west-1", "US West (N. California)", "USW1-", 1.17},
	{"us-west-2", "US West (Oregon)", "USW2-", 1.00},
	{"ca-central-1", "Canada (Central)", "CAN1-", 1.11},
	{"eu-west-1", "EU (Ireland)", "EU-", 1.11},
	{"eu-central-1", "EU (Frankfurt)", "EUC1-", 1.20},
	{"ap-south-1", "Asia Pacific (Mumbai)", "APS3-", 1.05},
	{"ap-southeast-1", "Asia Pacific (Singapore)", "APS1-", 1.25},
	{"ap-northeast-1", "Asia Pacific (Tokyo)", "APN1-", 1.29},
	{"sa-east-1", "South America (Sao Paulo)", "SAE1-", 1.59},
}

// prices is the on-demand list price per instance type in us-east-1.
type prices struct {
	types []string // sorted
	usd   map[string]float64
}

func loadPrices() (*prices, error) {
	p := &prices{usd: map[string]float64{}}
	sc := bufio.NewScanner(bytes.NewReader(onDemandTSV))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) != 2 {
			return nil, fmt.Errorf("on-demand price list line %d: want type and price, got %q", line, text)
		}
		v, err := strconv.ParseFloat(fields[1], 64)
		if err != nil {
			return nil, fmt.Errorf("on-demand price list line %d: %w", line, err)
		}
		p.usd[fields[0]] = v
		p.types = append(p.types, fields[0])
	}
	sort.Strings(p.types)
	return p, nil
}

// OnDemandPrice is the on-demand price the front serves for an instance
// type in a region, and whether it has one.
func (l *Local) OnDemandPrice(instanceType, regionCode string) (float64, bool) {
	return l.front.prices.onDemand(instanceType, regionCode)
}

// DedicatedFactor is how much more a dedicated-tenancy instance costs
// than a shared one in the front's price list (ours: AWS lists each type's
// dedicated price, typically about a tenth above the shared one).
const DedicatedFactor = 1.1

// DedicatedPrice is the dedicated-tenancy on-demand price the front serves
// for a (non-metal) instance type in a region, and whether it has one.
func (l *Local) DedicatedPrice(instanceType, regionCode string) (float64, bool) {
	return l.front.prices.dedicated(instanceType, regionCode)
}

func (p *prices) dedicated(instanceType, regionCode string) (float64, bool) {
	shared, ok := p.onDemand(instanceType, regionCode)
	if !ok || isMetal(instanceType) {
		return 0, false
	}
	return math.Round(shared*DedicatedFactor*1e6) / 1e6, true
}

func isMetal(instanceType string) bool { return strings.Contains(instanceType, ".metal") }

func (p *prices) onDemand(instanceType, regionCode string) (float64, bool) {
	base, ok := p.usd[instanceType]
	if !ok {
		return 0, false
	}
	for _, r := range RegionFactors {
		if r.Code == regionCode {
			return math.Round(base*r.Factor*1e6) / 1e6, true
		}
	}
	return 0, false
}

type priceFilter struct {
	Field string `json:"Field"`
	Type  string `json:"Type"`
	Value string `json:"Value"`
}

type getProductsInput struct {
	ServiceCode   string        `json:"ServiceCode"`
	Filters       []priceFilter `json:"Filters"`
	FormatVersion string        `json:"FormatVersion"`
	MaxResults    int           `json:"MaxResults"`
	NextToken     string        `json:"NextToken"`
}

// productAttributes are the attributes of the Linux, no-software,
// used-capacity on-demand product of one type in one region, shared or
// dedicated tenancy: the only products the price list covers.
func productAttributes(instanceType string, r region, dedicated bool) map[string]string {
	// The price list files bare-metal types as dedicated-tenancy bare
	// metal, and that is how upstream Karpenter asks for them.
	family, tenancy, usage := "Compute Instance", "Shared", "BoxUsage:"
	switch {
	case isMetal(instanceType):
		family, tenancy = "Compute Instance (bare metal)", "Dedicated"
	case dedicated:
		tenancy, usage = "Dedicated", "DedicatedUsage:"
	}
	return map[string]string{
		"servicecode":     "AmazonEC2",
		"servicename":     "Amazon Elastic Compute Cloud",
		"productFamily":   family,
		"instanceType":    instanceType,
		"operatingSystem": "Linux",
		"preInstalledSw":  "NA",
		"tenancy":         tenancy,
		"capacitystatus":  "Used",
		"licenseModel":    "No License required",
		"marketoption":    "OnDemand",
		"operation":       "RunInstances",
		"location":        r.Location,
		"locationType":    "AWS Region",
		"regionCode":      r.Code,
		"usagetype":       r.Prefix + usage + instanceType,
	}
}

func sku(instanceType, regionCode, tenancy string) string {
	h := fnv.New64a()
	key := regionCode + "/" + instanceType
	if tenancy == "Dedicated" && !isMetal(instanceType) {
		key += "/dedicated"
	}
	h.Write([]byte(key))
	const alphabet = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
	v := h.Sum64()
	var b [16]byte
	for i := range b {
		b[i] = alphabet[v%uint64(len(alphabet))]
		v = v/uint64(len(alphabet)) ^ uint64(i)*0x9e3779b97f4a7c15
	}
	return string(b[:])
}

func productJSON(instanceType string, r region, usd float64, attrs map[string]string) (string, error) {
	s := sku(instanceType, r.Code, attrs["tenancy"])
	term := s + ".JRTCKXETXF"
	rate := term + ".6YS6EN2CT7"
	doc := map[string]any{
		"product": map[string]any{
			"productFamily": attrs["productFamily"],
			"attributes":    attrs,
			"sku":           s,
		},
		"serviceCode": "AmazonEC2",
		"terms": map[string]any{
			"OnDemand": map[string]any{
				term: map[string]any{
					"priceDimensions": map[string]any{
						rate: map[string]any{
							"unit":         "Hrs",
							"endRange":     "Inf",
							"description":  fmt.Sprintf("$%s per On Demand Linux %s Instance Hour", strconv.FormatFloat(usd, 'f', -1, 64), instanceType),
							"appliesTo":    []string{},
							"rateCode":     rate,
							"beginRange":   "0",
							"pricePerUnit": map[string]string{"USD": strconv.FormatFloat(usd, 'f', 10, 64)},
						},
					},
					"sku":            s,
					"effectiveDate":  "2026-07-01T00:00:00Z",
					"offerTermCode":  "JRTCKXETXF",
					"termAttributes": map[string]string{},
				},
			},
		},
		"version":         "20260720000000",
		"publicationDate": "2026-07-20T00:00:00Z",
	}
	b, err := json.Marshal(doc)
	return string(b), err
}

// getProducts serves Pricing GetProducts for AmazonEC2 from the price list:
// TERM_MATCH filters compare attributes case-insensitively, as AWS does;
// a filter on an attribute the product lacks matches nothing.
func (f *front) getProducts(_ context.Context, w http.ResponseWriter, c *call) bool {
	var in getProductsInput
	if err := json.Unmarshal(c.Body, &in); err != nil {
		writeError(w, c, http.StatusBadRequest, "InvalidParameterException", "The request body is not valid JSON: "+err.Error())
		return true
	}
	if in.ServiceCode == "" {
		writeError(w, c, http.StatusBadRequest, "InvalidParameterException", "ServiceCode is required.")
		return true
	}
	size := 100
	if in.MaxResults != 0 {
		if in.MaxResults < 1 || in.MaxResults > 100 {
			writeError(w, c, http.StatusBadRequest, "InvalidParameterException", "MaxResults must be between 1 and 100.")
			return true
		}
		size = in.MaxResults
	}
	start := 0
	if in.NextToken != "" {
		n, err := decodeToken(in.NextToken, "GetProducts")
		if err != nil {
			writeError(w, c, http.StatusBadRequest, "InvalidNextTokenException", "The next token is invalid.")
			return true
		}
		start = n
	}
	for _, flt := range in.Filters {
		if flt.Type != "" && flt.Type != "TERM_MATCH" {
			writeError(w, c, http.StatusBadRequest, "InvalidParameterException", "Only TERM_MATCH filters are supported by the local AWS.")
			return true
		}
	}
	type match struct {
		typ       string
		r         region
		dedicated bool
	}
	var matches []match
	if in.ServiceCode == "AmazonEC2" {
		for _, r := range RegionFactors {
			for _, t := range f.prices.types {
				for _, dedicated := range []bool{false, true} {
					if dedicated && isMetal(t) {
						continue // bare metal has one product, dedicated already
					}
					if filtersMatch(in.Filters, productAttributes(t, r, dedicated)) {
						matches = append(matches, match{t, r, dedicated})
					}
				}
			}
		}
	}
	out := map[string]any{"FormatVersion": "aws_v1", "PriceList": []string{}}
	end := min(start+size, len(matches))
	list := make([]string, 0, max(end-start, 0))
	for _, m := range matches[min(start, len(matches)):end] {
		usd, _ := f.prices.onDemand(m.typ, m.r.Code)
		if m.dedicated {
			usd, _ = f.prices.dedicated(m.typ, m.r.Code)
		}
		doc, err := productJSON(m.typ, m.r, usd, productAttributes(m.typ, m.r, m.dedicated))
		if err != nil {
			writeError(w, c, http.StatusInternalServerError, "InternalErrorException", err.Error())
			return true
		}
		list = append(list, doc)
	}
	out["PriceList"] = list
	if end < len(matches) {
		out["NextToken"] = encodeToken(end, "GetProducts")
	}
	writeJSON(w, c, out)
	return true
}

func filtersMatch(filters []priceFilter, attrs map[string]string) bool {
	for _, flt := range filters {
		v, ok := attrs[flt.Field]
		if !ok {
			// Field names are case-insensitive too ("ServiceCode").
			for k, av := range attrs {
				if strings.EqualFold(k, flt.Field) {
					v, ok = av, true
					break
				}
			}
		}
		if !ok || !strings.EqualFold(v, flt.Value) {
			return false
		}
	}
	return true
}
