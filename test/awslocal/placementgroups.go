package awslocal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Placement groups, which moto does not implement: the front owns
// CreatePlacementGroup, DescribePlacementGroups and DeletePlacementGroup,
// with EC2's strategies (cluster, partition with 1..7 partitions, spread
// at rack level), ids, tags and errors.

// Placement strategies.
const (
	PlacementStrategyCluster   = "cluster"
	PlacementStrategyPartition = "partition"
	PlacementStrategySpread    = "spread"
)

// maxPartitions is EC2's limit of partitions per group.
const maxPartitions = 7

// PlacementGroup is a placement group as DescribePlacementGroups reports it.
type PlacementGroup struct {
	ID, Name, Region string
	Strategy         string
	// PartitionCount is set for partition groups; SpreadLevel for spread
	// groups (rack).
	PartitionCount int
	SpreadLevel    string
	State          string
	Tags           map[string]string
}

// ARN is the group's ARN, which names it by name as EC2's does.
func (g PlacementGroup) ARN() string { return ec2ARN(g.Region, "placement-group", g.Name) }

type placementGroups struct {
	byID  map[string]*PlacementGroup
	order []string
}

func (p *placementGroups) init() {
	if p.byID == nil {
		p.byID = map[string]*PlacementGroup{}
	}
}

// byName is the region's group of that name.
func (p *placementGroups) byName(region, name string) *PlacementGroup {
	for _, id := range p.order {
		if g := p.byID[id]; g.Region == region && g.Name == name {
			return g
		}
	}
	return nil
}

func (g *PlacementGroup) snapshot() PlacementGroup {
	out := *g
	out.Tags = make(map[string]string, len(g.Tags))
	for k, v := range g.Tags {
		out.Tags[k] = v
	}
	return out
}

var placementGroupIDRE = regexp.MustCompile(`^pg-[0-9a-f]{17}$`)

func (f *front) addPlacementGroupHandlers() {
	f.handlers[callKey{"ec2", "CreatePlacementGroup"}] = f.createPlacementGroup
	f.handlers[callKey{"ec2", "DescribePlacementGroups"}] = f.describePlacementGroups
	f.handlers[callKey{"ec2", "DeletePlacementGroup"}] = f.deletePlacementGroup
}

// newPlacementGroup validates a group and stores it; code is EC2's error.
func (s *ec2State) newPlacementGroup(g PlacementGroup) (PlacementGroup, string, string) {
	if g.Name == "" {
		return PlacementGroup{}, "MissingParameter", "The request must contain the parameter GroupName"
	}
	if len(g.Name) > 255 {
		return PlacementGroup{}, "InvalidParameterValue", "The placement group name must be at most 255 characters."
	}
	switch g.Strategy {
	case PlacementStrategyCluster:
	case PlacementStrategyPartition:
		if g.PartitionCount == 0 {
			g.PartitionCount = 2
		}
		if g.PartitionCount < 1 || g.PartitionCount > maxPartitions {
			return PlacementGroup{}, "InvalidParameterValue",
				fmt.Sprintf("Value (%d) for parameter PartitionCount is invalid. Valid values are between 1 and %d.", g.PartitionCount, maxPartitions)
		}
	case PlacementStrategySpread:
		if g.SpreadLevel == "" {
			g.SpreadLevel = "rack"
		}
		if g.SpreadLevel == "host" {
			return PlacementGroup{}, "InvalidParameterValue", "Spread level host is only supported for placement groups on an Outpost."
		}
		if g.SpreadLevel != "rack" {
			return PlacementGroup{}, "InvalidParameterValue", fmt.Sprintf("Value (%s) for parameter SpreadLevel is invalid.", g.SpreadLevel)
		}
	case "":
		return PlacementGroup{}, "MissingParameter", "The request must contain the parameter Strategy"
	default:
		return PlacementGroup{}, "InvalidParameterValue", fmt.Sprintf("Value (%s) for parameter Strategy is invalid.", g.Strategy)
	}
	if g.PartitionCount != 0 && g.Strategy != PlacementStrategyPartition {
		return PlacementGroup{}, "InvalidParameterCombination", "PartitionCount is valid only for partition placement groups."
	}
	if g.SpreadLevel != "" && g.Strategy != PlacementStrategySpread {
		return PlacementGroup{}, "InvalidParameterCombination", "SpreadLevel is valid only for spread placement groups."
	}
	if g.Region == "" {
		g.Region = DefaultRegion
	}
	g.State = "available"
	b := make([]byte, 9)
	_, _ = rand.Read(b)
	g.ID = "pg-" + hex.EncodeToString(b)[:17]
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pgs.init()
	if s.pgs.byName(g.Region, g.Name) != nil {
		return PlacementGroup{}, "InvalidPlacementGroup.Duplicate", fmt.Sprintf("The Placement Group '%s' already exists.", g.Name)
	}
	stored := g.snapshot()
	s.pgs.byID[g.ID] = &stored
	s.pgs.order = append(s.pgs.order, g.ID)
	return stored.snapshot(), "", ""
}

// AddPlacementGroup creates a placement group as CreatePlacementGroup
// does (region us-east-1 unless set).
func (l *Local) AddPlacementGroup(g PlacementGroup) (PlacementGroup, error) {
	out, code, msg := l.front.ec2.newPlacementGroup(g)
	if code != "" {
		return PlacementGroup{}, fmt.Errorf("%s: %s", code, msg)
	}
	return out, nil
}

// PlacementGroupByName is the region's group of that name.
func (l *Local) PlacementGroupByName(region, name string) (PlacementGroup, bool) {
	s := l.front.ec2
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pgs.init()
	if g := s.pgs.byName(region, name); g != nil {
		return g.snapshot(), true
	}
	return PlacementGroup{}, false
}

func (f *front) createPlacementGroup(_ context.Context, w http.ResponseWriter, c *call) bool {
	g := PlacementGroup{Name: c.Form.Get("GroupName"), Region: c.Region, Strategy: c.Form.Get("Strategy"),
		SpreadLevel: c.Form.Get("SpreadLevel"), Tags: map[string]string{}}
	if v := c.Form.Get("PartitionCount"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeError(w, c, http.StatusBadRequest, "InvalidParameterValue", fmt.Sprintf("Value (%s) for parameter PartitionCount is invalid.", v))
			return true
		}
		g.PartitionCount = n
	}
	for typ, tags := range tagSpecs(c.Form, "TagSpecification") {
		if typ != "placement-group" {
			writeError(w, c, http.StatusBadRequest, "InvalidParameterValue",
				fmt.Sprintf("'%s' is not a valid taggable resource type for this operation.", typ))
			return true
		}
		for k, v := range tags {
			g.Tags[k] = v
		}
	}
	if dryRun(w, c) {
		return true
	}
	out, code, msg := f.ec2.newPlacementGroup(g)
	if code != "" {
		writeError(w, c, http.StatusBadRequest, code, msg)
		return true
	}
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	b.WriteString(`<CreatePlacementGroupResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>` + newRequestID() + `</requestId><return>true</return>`)
	writePlacementGroup(&b, "placementGroup", out)
	b.WriteString("</CreatePlacementGroupResponse>")
	writeXML(w, []byte(b.String()))
	return true
}

// dryRun answers a DryRun request as EC2 does once it is authorized.
func dryRun(w http.ResponseWriter, c *call) bool {
	if c.Form.Get("DryRun") != "true" {
		return false
	}
	writeError(w, c, http.StatusPreconditionFailed, "DryRunOperation", "Request would have succeeded, but DryRun flag is set.")
	return true
}

var placementGroupFilters = []string{"group-name", "group-arn", "state", "strategy", "spread-level", "tag-key"}

// describePlacementGroups serves the region's groups, selected by name, id
// and filters. An unknown name is InvalidPlacementGroup.Unknown, an unknown
// id InvalidPlacementGroupId.NotFound, a malformed one
// InvalidPlacementGroupId.Malformed.
func (f *front) describePlacementGroups(_ context.Context, w http.ResponseWriter, c *call) bool {
	filters := ec2Filters(c.Form)
	for name := range filters {
		if !slices.Contains(placementGroupFilters, name) && !strings.HasPrefix(name, "tag:") {
			writeError(w, c, http.StatusBadRequest, "InvalidParameterValue", fmt.Sprintf("The filter '%s' is invalid", name))
			return true
		}
	}
	names, ids := ec2List(c.Form, "GroupName"), ec2List(c.Form, "GroupId")
	for _, id := range ids {
		if !placementGroupIDRE.MatchString(id) {
			writeError(w, c, http.StatusBadRequest, "InvalidPlacementGroupId.Malformed", fmt.Sprintf("Invalid id: \"%s\"", id))
			return true
		}
	}
	if dryRun(w, c) {
		return true
	}
	s := f.ec2
	s.mu.Lock()
	s.pgs.init()
	var all []PlacementGroup
	for _, id := range s.pgs.order {
		if g := s.pgs.byID[id]; g.Region == c.Region {
			all = append(all, g.snapshot())
		}
	}
	s.mu.Unlock()
	for _, name := range names {
		if !slices.ContainsFunc(all, func(g PlacementGroup) bool { return g.Name == name }) {
			writeError(w, c, http.StatusBadRequest, "InvalidPlacementGroup.Unknown", fmt.Sprintf("The Placement Group '%s' is unknown.", name))
			return true
		}
	}
	for _, id := range ids {
		if !slices.ContainsFunc(all, func(g PlacementGroup) bool { return g.ID == id }) {
			writeError(w, c, http.StatusBadRequest, "InvalidPlacementGroupId.NotFound", fmt.Sprintf("The Placement Group ID '%s' does not exist.", id))
			return true
		}
	}
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	b.WriteString(`<DescribePlacementGroupsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>` + newRequestID() + `</requestId><placementGroupSet>`)
	for _, g := range all {
		if (len(names) > 0 || len(ids) > 0) && !slices.Contains(names, g.Name) && !slices.Contains(ids, g.ID) {
			continue
		}
		if placementGroupMatches(g, filters) {
			writePlacementGroup(&b, "item", g)
		}
	}
	b.WriteString("</placementGroupSet></DescribePlacementGroupsResponse>")
	writeXML(w, []byte(b.String()))
	return true
}

func placementGroupMatches(g PlacementGroup, filters map[string][]string) bool {
	for name, values := range filters {
		var v []string
		switch name {
		case "group-name":
			v = []string{g.Name}
		case "group-arn":
			v = []string{g.ARN()}
		case "state":
			v = []string{g.State}
		case "strategy":
			v = []string{g.Strategy}
		case "spread-level":
			v = []string{g.SpreadLevel}
		case "tag-key":
			for k := range g.Tags {
				v = append(v, k)
			}
		default: // tag:<key>
			if tv, ok := g.Tags[strings.TrimPrefix(name, "tag:")]; ok {
				v = []string{tv}
			}
		}
		if !slices.ContainsFunc(v, func(s string) bool { return allowed(values, s) }) {
			return false
		}
	}
	return true
}

func writePlacementGroup(b *strings.Builder, elem string, g PlacementGroup) {
	fmt.Fprintf(b, "<%s><groupName>%s</groupName><state>%s</state><strategy>%s</strategy>", elem, xmlText(g.Name), g.State, g.Strategy)
	if g.PartitionCount > 0 {
		fmt.Fprintf(b, "<partitionCount>%d</partitionCount>", g.PartitionCount)
	}
	fmt.Fprintf(b, "<groupId>%s</groupId><tagSet>", g.ID)
	keys := make([]string, 0, len(g.Tags))
	for k := range g.Tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString("<item><key>" + xmlText(k) + "</key><value>" + xmlText(g.Tags[k]) + "</value></item>")
	}
	fmt.Fprintf(b, "</tagSet><groupArn>%s</groupArn>", xmlText(g.ARN()))
	if g.SpreadLevel != "" {
		fmt.Fprintf(b, "<spreadLevel>%s</spreadLevel>", g.SpreadLevel)
	}
	fmt.Fprintf(b, "</%s>", elem)
}

// deletePlacementGroup removes a group by name; one with running
// instances is InvalidPlacementGroup.InUse.
func (f *front) deletePlacementGroup(_ context.Context, w http.ResponseWriter, c *call) bool {
	name := c.Form.Get("GroupName")
	if name == "" {
		writeError(w, c, http.StatusBadRequest, "MissingParameter", "The request must contain the parameter GroupName")
		return true
	}
	if dryRun(w, c) {
		return true
	}
	s := f.ec2
	s.mu.Lock()
	s.pgs.init()
	g := s.pgs.byName(c.Region, name)
	code, msg := "", ""
	switch {
	case g == nil:
		code, msg = "InvalidPlacementGroup.Unknown", fmt.Sprintf("The Placement Group '%s' is unknown.", name)
	case s.placementGroupInUse(g.ID):
		code, msg = "InvalidPlacementGroup.InUse", fmt.Sprintf("The placement group '%s' is in use and may not be deleted.", name)
	default:
		delete(s.pgs.byID, g.ID)
		s.pgs.order = slices.DeleteFunc(s.pgs.order, func(id string) bool { return id == g.ID })
	}
	s.mu.Unlock()
	if code != "" {
		writeError(w, c, http.StatusBadRequest, code, msg)
		return true
	}
	writeXML(w, []byte(`<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
		`<DeletePlacementGroupResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>`+newRequestID()+`</requestId><return>true</return></DeletePlacementGroupResponse>`))
	return true
}

// placementGroupInUse is whether a live instance the front launched is in
// the group; s.mu is held.
func (s *ec2State) placementGroupInUse(id string) bool {
	for _, inst := range s.instances {
		if !inst.Terminated && inst.PlacementGroupID == id {
			return true
		}
	}
	return false
}

// placementGroupTags are the tags of the region's group of that name (none
// when there is no such group).
func (f *front) placementGroupTags(region, name string) map[string]string {
	s := f.ec2
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pgs.init()
	if g := s.pgs.byName(region, name); g != nil {
		return g.snapshot().Tags
	}
	return map[string]string{}
}

// templateGroup is the placement group a launch template names (nil for
// none); code is EC2's error when it names one EC2 does not have, or a
// partition the group cannot take.
func (s *ec2State) templateGroup(region string, lt *launchTemplate) (*PlacementGroup, string, string) {
	if lt.PlacementGroupName == "" && lt.PlacementGroupID == "" {
		return nil, "", ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pgs.init()
	var g *PlacementGroup
	if lt.PlacementGroupID != "" {
		if g = s.pgs.byID[lt.PlacementGroupID]; g == nil || g.Region != region {
			return nil, "InvalidPlacementGroupId.NotFound", fmt.Sprintf("The Placement Group ID '%s' does not exist.", lt.PlacementGroupID)
		}
	} else if g = s.pgs.byName(region, lt.PlacementGroupName); g == nil {
		return nil, "InvalidPlacementGroup.Unknown", fmt.Sprintf("The Placement Group '%s' is unknown.", lt.PlacementGroupName)
	}
	if n := lt.PartitionNumber; n != 0 && (g.Strategy != PlacementStrategyPartition || n < 1 || n > g.PartitionCount) {
		return nil, "InvalidParameterValue", fmt.Sprintf("Partition number %d is not valid for placement group '%s'.", n, g.Name)
	}
	out := g.snapshot()
	return &out, "", ""
}

// partitionFor is the partition a launch into g goes to: the one asked
// for, or, as EC2 spreads instances evenly, the partition with the fewest
// live instances (lowest number first); 0 outside partition groups. s.mu
// is held.
func (s *ec2State) partitionFor(g *PlacementGroup, asked int) int {
	if g.Strategy != PlacementStrategyPartition {
		return 0
	}
	if asked > 0 {
		return asked
	}
	count := make([]int, g.PartitionCount+1)
	for _, inst := range s.instances {
		if !inst.Terminated && inst.PlacementGroupID == g.ID && inst.Partition > 0 && inst.Partition <= g.PartitionCount {
			count[inst.Partition]++
		}
	}
	best := 1
	for p := 2; p <= g.PartitionCount; p++ {
		if count[p] < count[best] {
			best = p
		}
	}
	return best
}

// overlayPlacementGroup shows the instance's group (and partition) on its
// placement, as DescribeInstances reports it.
func overlayPlacementGroup(inst *xnode, rec *launched, g *PlacementGroup) {
	if rec.PlacementGroupID == "" {
		return
	}
	placement := inst.child("placement")
	if placement == nil {
		placement = el("placement")
		inst.set(placement)
	}
	if g != nil {
		placement.set(leaf("groupName", g.Name))
	}
	placement.set(leaf("groupId", rec.PlacementGroupID))
	if rec.Partition > 0 {
		placement.set(leaf("partitionNumber", strconv.Itoa(rec.Partition)))
	}
}

// placementGroupName is the name of the group with that id, or the id
// itself when there is none (EC2 then refuses the launch anyway).
func (f *front) placementGroupName(region, id string) string {
	s := f.ec2
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pgs.init()
	if g := s.pgs.byID[id]; g != nil && g.Region == region {
		return g.Name
	}
	return id
}

// maxSpreadPerZone is EC2's limit of running instances per Availability
// Zone in a rack spread group.
const maxSpreadPerZone = 7

// groupRoom is how many more instances the candidate's placement group
// takes in the candidate's zone (-1: no limit), or EC2's refusal: a
// cluster group lives in the zone of its first instance, and a rack spread
// group holds at most seven running instances per zone. EC2 checks both
// per launch, so a fleet sees them per override.
func (s *ec2State) groupRoom(cd *candidate) (int, string, string) {
	if cd.group == nil {
		return -1, "", ""
	}
	g, zone := cd.group, cd.subnet.Zone
	s.mu.Lock()
	defer s.mu.Unlock()
	inZone := 0
	for _, inst := range s.instances {
		if inst.Terminated || inst.PlacementGroupID != g.ID {
			continue
		}
		if g.Strategy == PlacementStrategyCluster && inst.Zone != zone {
			return 0, "InvalidPlacementGroup.InUse", fmt.Sprintf("The placement group '%s' is in use in another availability zone: %s", g.Name, inst.Zone)
		}
		if inst.Zone == zone {
			inZone++
		}
	}
	if g.Strategy != PlacementStrategySpread {
		return -1, "", ""
	}
	if inZone >= maxSpreadPerZone {
		return 0, "InsufficientInstanceCapacity", fmt.Sprintf("The spread placement group '%s' already has the maximum of %d running instances in the Availability Zone (%s). "+
			"Launch the instance in another Availability Zone or placement group.", g.Name, maxSpreadPerZone, zone)
	}
	return maxSpreadPerZone - inZone, "", ""
}
