package awslocal

import (
	"context"
	"encoding/xml"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Spot prices are a deterministic fraction of the on-demand price per
// instance type and zone, between SpotFractionMin and SpotFractionMax, so
// zones differ the way real spot markets do and every run sees the same
// prices. Tests override single prices with SetSpotPrice.
const (
	SpotFractionMin = 0.3
	SpotFractionMax = 0.7
)

var spotDescriptions = []string{"Linux/UNIX", "Linux/UNIX (Amazon VPC)"}

type spotKey struct{ Zone, InstanceType string }

type spotOverride struct {
	Price float64
	At    time.Time
}

type spotPrices struct {
	prices *prices
	since  time.Time

	mu        sync.Mutex
	overrides map[spotKey]spotOverride
}

func newSpotPrices(p *prices) *spotPrices {
	return &spotPrices{prices: p, since: time.Now().UTC().Truncate(time.Hour).Add(-time.Hour), overrides: map[spotKey]spotOverride{}}
}

// price is the spot price of a type in a zone (of region) and when it took
// effect.
func (s *spotPrices) price(regionCode, zone, instanceType string) (float64, time.Time, bool) {
	s.mu.Lock()
	o, ok := s.overrides[spotKey{zone, instanceType}]
	s.mu.Unlock()
	if ok {
		return o.Price, o.At, true
	}
	od, ok := s.prices.onDemand(instanceType, regionCode)
	if !ok {
		return 0, time.Time{}, false
	}
	return math.Round(od*spotFraction(zone, instanceType)*1e6) / 1e6, s.since, true
}

func spotFraction(zone, instanceType string) float64 {
	h := fnv.New64a()
	h.Write([]byte(zone + "/" + instanceType))
	return SpotFractionMin + (SpotFractionMax-SpotFractionMin)*float64(h.Sum64()%10001)/10000
}

// SpotPrice is the spot price the front reports for a type in a zone of
// region.
func (l *Local) SpotPrice(regionCode, zone, instanceType string) (float64, bool) {
	p, _, ok := l.front.spot.price(regionCode, zone, instanceType)
	return p, ok
}

// SetSpotPrice makes DescribeSpotPriceHistory report price for the type in
// zone from now on, as a new history entry.
func (l *Local) SetSpotPrice(zone, instanceType string, price float64) error {
	if price <= 0 {
		return fmt.Errorf("spot price %v for %s in %s must be positive", price, instanceType, zone)
	}
	l.front.spot.mu.Lock()
	defer l.front.spot.mu.Unlock()
	l.front.spot.overrides[spotKey{zone, instanceType}] = spotOverride{Price: price, At: time.Now().UTC().Truncate(time.Second)}
	return nil
}

// ClearSpotPrices drops every SetSpotPrice override.
func (l *Local) ClearSpotPrices() {
	l.front.spot.mu.Lock()
	defer l.front.spot.mu.Unlock()
	l.front.spot.overrides = map[spotKey]spotOverride{}
}

type zone struct {
	Name string `xml:"zoneName"`
	ID   string `xml:"zoneId"`
}

// regionZones are moto's availability zones for a region, asked once.
func (f *front) regionZones(ctx context.Context, regionCode string) ([]zone, error) {
	f.zonesMu.Lock()
	defer f.zonesMu.Unlock()
	if z, ok := f.zones[regionCode]; ok {
		return z, nil
	}
	body, err := f.motoCall(ctx, "ec2", regionCode, map[string][]string{"Action": {"DescribeAvailabilityZones"}, "Version": {"2016-11-15"}})
	if err != nil {
		return nil, err
	}
	var doc struct {
		Zones []zone `xml:"availabilityZoneInfo>item"`
	}
	if err := xml.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("parsing moto's zones: %w", err)
	}
	f.zones[regionCode] = doc.Zones
	return doc.Zones, nil
}

// ec2List collects the values of a numbered EC2 list parameter
// ("InstanceType.1", "InstanceType.2", ...).
func ec2List(form map[string][]string, name string) []string {
	type kv struct {
		n int
		v string
	}
	var items []kv
	for k, vs := range form {
		rest, ok := strings.CutPrefix(k, name+".")
		if !ok || len(vs) == 0 {
			continue
		}
		n, err := strconv.Atoi(rest)
		if err != nil {
			continue
		}
		items = append(items, kv{n, vs[0]})
	}
	sort.Slice(items, func(i, j int) bool { return items[i].n < items[j].n })
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.v
	}
	return out
}

// ec2Filters decodes Filter.N.Name / Filter.N.Value.M.
func ec2Filters(form map[string][]string) map[string][]string {
	out := map[string][]string{}
	for k, vs := range form {
		rest, ok := strings.CutPrefix(k, "Filter.")
		if !ok || !strings.HasSuffix(rest, ".Name") || len(vs) == 0 {
			continue
		}
		n := strings.TrimSuffix(rest, ".Name")
		out[vs[0]] = append(out[vs[0]], ec2List(form, "Filter."+n+".Value")...)
	}
	return out
}

func allowed(set []string, v string) bool {
	if len(set) == 0 {
		return true
	}
	for _, s := range set {
		if s == v || (strings.HasSuffix(s, "*") && strings.HasPrefix(v, strings.TrimSuffix(s, "*"))) {
			return true
		}
	}
	return false
}

type spotEntry struct {
	Zone, Type, Description string
	Price                   float64
	At                      time.Time
}

// describeSpotPriceHistory reports the current price (one entry per type,
// zone and product description) of every priced type, filtered by the
// request's types, zone, product descriptions and filters, and paged.
func (f *front) describeSpotPriceHistory(ctx context.Context, w http.ResponseWriter, c *call) bool {
	filters := ec2Filters(c.Form)
	for name := range filters {
		switch name {
		case "availability-zone", "instance-type", "product-description":
		default:
			writeError(w, c, http.StatusBadRequest, "InvalidParameterValue", fmt.Sprintf("The filter '%s' is invalid", name))
			return true
		}
	}
	zones, err := f.regionZones(ctx, c.Region)
	if err != nil {
		writeError(w, c, http.StatusInternalServerError, "InternalError", err.Error())
		return true
	}
	types := ec2List(c.Form, "InstanceType")
	descs := ec2List(c.Form, "ProductDescription")
	wantZone := c.Form.Get("AvailabilityZone")
	size := 1000
	if m := c.Form.Get("MaxResults"); m != "" {
		n, err := strconv.Atoi(m)
		if err != nil || n < 1 || n > 1000 {
			writeError(w, c, http.StatusBadRequest, "InvalidParameterValue", "MaxResults must be between 1 and 1000.")
			return true
		}
		size = n
	}
	start := 0
	if tok := c.Form.Get("NextToken"); tok != "" {
		if start, err = decodeToken(tok, c.Action); err != nil {
			writeError(w, c, http.StatusBadRequest, "InvalidNextToken", "The specified token is invalid.")
			return true
		}
	}
	var entries []spotEntry
	for _, t := range f.prices.types {
		if !allowed(types, t) || !allowed(filters["instance-type"], t) {
			continue
		}
		for _, z := range zones {
			if (wantZone != "" && wantZone != z.Name) || !allowed(filters["availability-zone"], z.Name) {
				continue
			}
			price, at, ok := f.spot.price(c.Region, z.Name, t)
			if !ok {
				continue
			}
			for _, d := range spotDescriptions {
				if !allowed(descs, d) || !allowed(filters["product-description"], d) {
					continue
				}
				entries = append(entries, spotEntry{z.Name, t, d, price, at})
			}
		}
	}
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	b.WriteString(`<DescribeSpotPriceHistoryResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>` + newRequestID() + `</requestId><spotPriceHistorySet>`)
	end := min(start+size, len(entries))
	for _, e := range entries[min(start, len(entries)):end] {
		fmt.Fprintf(&b, "<item><instanceType>%s</instanceType><productDescription>%s</productDescription><spotPrice>%s</spotPrice><timestamp>%s</timestamp><availabilityZone>%s</availabilityZone></item>",
			e.Type, xmlText(e.Description), strconv.FormatFloat(e.Price, 'f', 6, 64), e.At.Format("2006-01-02T15:04:05.000Z"), e.Zone)
	}
	b.WriteString("</spotPriceHistorySet>")
	if end < len(entries) {
		b.WriteString("<nextToken>" + encodeToken(end, c.Action) + "</nextToken>")
	}
	b.WriteString("</DescribeSpotPriceHistoryResponse>")
	writeXML(w, []byte(b.String()))
	return true
}
