package awslocal

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/google/uuid"
)

// Capacity types of the capacity table, as CreateFleet names them.
const (
	CapacityTypeOnDemand = "on-demand"
	CapacityTypeSpot     = "spot"
)

type capKey struct{ Type, Zone, CapacityType string }

// ec2State is what the front keeps about EC2 beyond moto: the capacity
// table, capacity reservations, the attributes of instances it launched
// that moto drops, and instance health.
type ec2State struct {
	// launchMu orders CreateFleet calls as EC2 would answer them: fleets
	// that launch only from unlimited pools share it and are served
	// concurrently; a fleet that may meet a count (a capacity limit, a
	// reservation, a placement group, a subnet near its last addresses)
	// holds it alone, so the counts it reads stay exact until it is done.
	launchMu sync.RWMutex
	// admitMu makes a shared fleet's reading of its subnets' free
	// addresses and its claim on them (sharedInFlight, the instances
	// shared fleets may still launch) one step, so two fleets never
	// count the same addresses.
	admitMu        sync.Mutex
	sharedInFlight int
	// motoMu runs moto's RunInstances alone, with the front's record of
	// the instances it made, and keeps the booter's listing out meanwhile:
	// moto builds an instance in steps and allocates addresses from a
	// per-subnet generator that concurrent calls would share.
	motoMu sync.Mutex
	// admitted, when set (tests), is called by each fleet once it holds its
	// slot, before it launches.
	admitted func()

	mu           sync.Mutex
	capacity     map[capKey]int
	reservations map[string]*reservation
	resOrder     []string
	instances    map[string]*launched
	// launchedCh is closed, and replaced, each time CreateFleet launches
	// instances, so a booter registers them at once rather than at its
	// next scan.
	launchedCh chan struct{}
	health     map[string]*health
	nextEvent  int
	// pgs are the placement groups (placementgroups.go).
	pgs placementGroups
}

// launched is an instance CreateFleet started, with what DescribeInstances
// must report that moto does not keep.
type launched struct {
	ID, FleetID, Region   string
	ReservationID         string
	ReservationPreference string
	CapacityBlock         bool
	// DropDevice is the default root device moto adds beside the launch
	// template's mappings, which EC2 would not attach.
	DropDevice string
	Terminated bool
	// Interfaces are the template's network interfaces, and Tenancy its
	// placement tenancy, shown by DescribeInstances (efa.go).
	Interfaces []ltInterface
	Tenancy    string
	// PlacementGroupID and Partition are the group the instance launched
	// in and its partition, and Zone its zone, which a cluster or spread
	// group's next launches are checked against (placementgroups.go).
	PlacementGroupID string
	Partition        int
	Zone             string
}

func newEC2State() *ec2State {
	return &ec2State{capacity: map[capKey]int{}, reservations: map[string]*reservation{}, instances: map[string]*launched{},
		launchedCh: make(chan struct{}), health: map[string]*health{}}
}

// nextLaunch is closed when CreateFleet next launches instances.
func (s *ec2State) nextLaunch() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.launchedCh
}

// announceLaunch wakes whoever waits on nextLaunch.
func (s *ec2State) announceLaunch() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.launchedCh)
	s.launchedCh = make(chan struct{})
}

// fleetLaunched is whether CreateFleet launched the instance: its
// RunInstances has returned, so moto has attached its volumes.
func (s *ec2State) fleetLaunched(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.instances[id]
	return ok
}

func (f *front) addEC2Handlers() {
	f.info = newEC2Info()
	f.ec2 = newEC2State()
	f.handlers[callKey{"ec2", "CreateFleet"}] = f.createFleet
	f.handlers[callKey{"ec2", "DescribeInstances"}] = f.describeInstances
	f.handlers[callKey{"ec2", "TerminateInstances"}] = f.terminateInstances
	f.handlers[callKey{"ec2", "DescribeCapacityReservations"}] = f.describeCapacityReservations
	f.handlers[callKey{"ec2", "DescribeInstanceStatus"}] = f.describeInstanceStatus
	f.addPlacementGroupHandlers()
}

// SetCapacity limits how many more instances of the type CreateFleet can
// launch in zone with capacityType (on-demand or spot); each launch uses
// one. n < 0 makes the offering unlimited again (the default).
func (l *Local) SetCapacity(instanceType, zone, capacityType string, n int) error {
	if capacityType != CapacityTypeOnDemand && capacityType != CapacityTypeSpot {
		return fmt.Errorf("capacity type %q: want on-demand or spot", capacityType)
	}
	s := l.front.ec2
	// Not under a shared fleet, which launched on finding the pool
	// unlimited.
	s.launchMu.Lock()
	defer s.launchMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	k := capKey{instanceType, zone, capacityType}
	if n < 0 {
		delete(s.capacity, k)
	} else {
		s.capacity[k] = n
	}
	return nil
}

// Capacity is the remaining capacity of an offering; limited is false when
// it is unlimited.
func (l *Local) Capacity(instanceType, zone, capacityType string) (n int, limited bool) {
	s := l.front.ec2
	s.mu.Lock()
	defer s.mu.Unlock()
	n, limited = s.capacity[capKey{instanceType, zone, capacityType}]
	return n, limited
}

// ClearCapacity makes every offering unlimited again.
func (l *Local) ClearCapacity() {
	s := l.front.ec2
	s.mu.Lock()
	defer s.mu.Unlock()
	s.capacity = map[capKey]int{}
}

// fleetOverride is one LaunchTemplateConfigs.N.Overrides.M entry.
type fleetOverride struct {
	InstanceType, SubnetID, Zone, ImageID, MaxPrice string
	Priority                                        float64
	HasPriority                                     bool
}

type fleetConfig struct {
	LTID, LTName, Version string
	Overrides             []fleetOverride
}

type fleetRequest struct {
	CapacityType string
	Total        int
	Strategy     string
	Configs      []fleetConfig
	Tags         url.Values // TagSpecification.N.* for the instance, renumbered
	// principal is set when a principal asked: it sees eventual
	// consistency (consistency.go).
	principal bool
}

// listIndexes are the N of "prefix.N." keys, ascending.
func listIndexes(form url.Values, prefix string) []int {
	seen := map[int]bool{}
	for k := range form {
		rest, ok := strings.CutPrefix(k, prefix+".")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.SplitN(rest, ".", 2)[0])
		if err == nil {
			seen[n] = true
		}
	}
	out := make([]int, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}

var spotStrategies = []string{"lowest-price", "diversified", "capacity-optimized", "capacity-optimized-prioritized", "price-capacity-optimized"}
var onDemandStrategies = []string{"lowest-price", "prioritized"}

func parseFleetRequest(form url.Values) (*fleetRequest, string, string) {
	req := &fleetRequest{CapacityType: form.Get("TargetCapacitySpecification.DefaultTargetCapacityType"), Tags: url.Values{}}
	switch req.CapacityType {
	case "":
		return nil, "MissingParameter", "The request must contain the parameter TargetCapacitySpecification.DefaultTargetCapacityType"
	case CapacityTypeOnDemand, CapacityTypeSpot, "capacity-block":
	default:
		return nil, "InvalidParameterValue", fmt.Sprintf("Value (%s) for parameter DefaultTargetCapacityType is invalid.", req.CapacityType)
	}
	total, err := strconv.Atoi(form.Get("TargetCapacitySpecification.TotalTargetCapacity"))
	if err != nil || total < 1 {
		return nil, "InvalidParameterValue", "TotalTargetCapacity must be a positive integer."
	}
	req.Total = total
	if req.CapacityType == CapacityTypeSpot {
		req.Strategy = form.Get("SpotOptions.AllocationStrategy")
		if req.Strategy == "" {
			req.Strategy = "lowest-price"
		}
		if !slices.Contains(spotStrategies, req.Strategy) {
			return nil, "InvalidParameterValue", fmt.Sprintf("Value (%s) for parameter SpotOptions.AllocationStrategy is invalid.", req.Strategy)
		}
	} else {
		req.Strategy = form.Get("OnDemandOptions.AllocationStrategy")
		if req.Strategy == "" {
			req.Strategy = "lowest-price"
		}
		if !slices.Contains(onDemandStrategies, req.Strategy) {
			return nil, "InvalidParameterValue", fmt.Sprintf("Value (%s) for parameter OnDemandOptions.AllocationStrategy is invalid.", req.Strategy)
		}
	}
	for _, n := range listIndexes(form, "LaunchTemplateConfigs") {
		p := fmt.Sprintf("LaunchTemplateConfigs.%d.", n)
		cfg := fleetConfig{
			LTID:    form.Get(p + "LaunchTemplateSpecification.LaunchTemplateId"),
			LTName:  form.Get(p + "LaunchTemplateSpecification.LaunchTemplateName"),
			Version: form.Get(p + "LaunchTemplateSpecification.Version"),
		}
		if cfg.LTID == "" && cfg.LTName == "" {
			return nil, "InvalidFleetConfiguration", "A launch template configuration must name a launch template by id or name."
		}
		for _, m := range listIndexes(form, p+"Overrides") {
			q := fmt.Sprintf("%sOverrides.%d.", p, m)
			o := fleetOverride{InstanceType: form.Get(q + "InstanceType"), SubnetID: form.Get(q + "SubnetId"), Zone: form.Get(q + "AvailabilityZone"),
				ImageID: form.Get(q + "ImageId"), MaxPrice: form.Get(q + "MaxPrice")}
			if v := form.Get(q + "Priority"); v != "" {
				pr, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return nil, "InvalidParameterValue", fmt.Sprintf("Value (%s) for parameter Priority is invalid.", v)
				}
				o.Priority, o.HasPriority = pr, true
			}
			if o.InstanceType == "" {
				return nil, "InvalidFleetConfiguration", "Every override must name an InstanceType in the local AWS (instance requirements are not supported)."
			}
			cfg.Overrides = append(cfg.Overrides, o)
		}
		if len(cfg.Overrides) == 0 {
			// A config without overrides launches the template as it is.
			return nil, "InvalidFleetConfiguration", "The local AWS needs overrides with an InstanceType in every launch template configuration."
		}
		req.Configs = append(req.Configs, cfg)
	}
	if len(req.Configs) == 0 {
		return nil, "MissingParameter", "The request must contain the parameter LaunchTemplateConfigs."
	}
	// The instance, volume and network-interface tags go to RunInstances;
	// the fleet's own tags have nothing to attach to.
	out := 0
	for _, n := range listIndexes(form, "TagSpecification") {
		p := fmt.Sprintf("TagSpecification.%d.", n)
		switch form.Get(p + "ResourceType") {
		case "instance", "volume", "network-interface":
		default:
			continue
		}
		out++
		for k, v := range form {
			if rest, ok := strings.CutPrefix(k, p); ok {
				req.Tags[fmt.Sprintf("TagSpecification.%d.%s", out, rest)] = v
			}
		}
	}
	return req, "", ""
}

// launchTemplate is the part of a launch template version the front needs.
type launchTemplate struct {
	ID, Name, Version string
	ImageID           string
	ProfileName       string
	ProfileArn        string
	Metadata          map[string]string
	ReservationID     string
	ReservationPref   string
	MarketType        string
	Devices           []string
	// SecurityGroups are the template's groups, top-level or on its
	// network interfaces.
	SecurityGroups []string
	// Interfaces are the template's network interfaces (efa.go).
	Interfaces []ltInterface
	// Tenancy is the template's placement tenancy (efa.go).
	Tenancy string
	// PlacementGroupName or PlacementGroupID name the template's placement
	// group, PartitionNumber its partition (placementgroups.go).
	PlacementGroupName, PlacementGroupID string
	PartitionNumber                      int
}

var metadataFields = []string{"HttpTokens", "HttpPutResponseHopLimit", "HttpEndpoint", "HttpProtocolIpv6", "InstanceMetadataTags"}

// launchTemplate resolves the configuration's template version in moto;
// code is the EC2 error when it does not exist.
func (f *front) launchTemplate(ctx context.Context, region string, cfg fleetConfig) (*launchTemplate, string, string, error) {
	form := ec2Form("DescribeLaunchTemplateVersions")
	if cfg.LTID != "" {
		form.Set("LaunchTemplateId", cfg.LTID)
	} else {
		form.Set("LaunchTemplateName", cfg.LTName)
	}
	version := cfg.Version
	if version == "" {
		version = "$Default"
	}
	form.Set("LaunchTemplateVersion.1", version)
	status, body, err := f.motoRaw(ctx, region, form)
	if err != nil {
		return nil, "", "", err
	}
	if status != http.StatusOK {
		code, msg := ec2ErrorOf(body)
		if code == "" {
			code, msg = "InvalidLaunchTemplateId.NotFound", fmt.Sprintf("The specified launch template, with template ID %s, does not exist.", cfg.LTID)
		}
		return nil, code, msg, nil
	}
	doc, err := parseXML(body)
	if err != nil {
		return nil, "", "", err
	}
	items := doc.items("launchTemplateVersionSet")
	if len(items) == 0 {
		if cfg.LTID != "" {
			return nil, "InvalidLaunchTemplateId.NotFound", fmt.Sprintf("The specified launch template, with template ID %s, does not exist.", cfg.LTID), nil
		}
		return nil, "InvalidLaunchTemplateName.NotFoundException", fmt.Sprintf("The specified launch template, with template name %s, does not exist.", cfg.LTName), nil
	}
	it := items[0]
	data := it.child("launchTemplateData")
	lt := &launchTemplate{
		ID: it.text("launchTemplateId"), Name: it.text("launchTemplateName"), Version: it.text("versionNumber"),
		ImageID:         data.text("imageId"),
		ProfileName:     data.text("iamInstanceProfile", "name"),
		ProfileArn:      data.text("iamInstanceProfile", "arn"),
		ReservationID:   data.text("capacityReservationSpecification", "capacityReservationTarget", "capacityReservationId"),
		ReservationPref: data.text("capacityReservationSpecification", "capacityReservationPreference"),
		MarketType:      data.text("instanceMarketOptions", "marketType"),
		Metadata:        map[string]string{},
	}
	for _, fld := range metadataFields {
		if v := data.text("metadataOptions", lowerFirst(fld)); v != "" {
			lt.Metadata[fld] = v
		}
	}
	for _, bd := range data.items("blockDeviceMappingSet") {
		lt.Devices = append(lt.Devices, bd.text("deviceName"))
	}
	lt.SecurityGroups = childTexts(data.child("securityGroupIdSet"))
	lt.Interfaces = templateInterfaces(data)
	lt.Tenancy = data.text("placement", "tenancy")
	lt.PlacementGroupName, lt.PlacementGroupID = data.text("placement", "groupName"), data.text("placement", "groupId")
	lt.PartitionNumber, _ = strconv.Atoi(data.text("placement", "partitionNumber"))
	for _, ni := range data.items("networkInterfaceSet") {
		lt.SecurityGroups = append(lt.SecurityGroups, childTexts(ni.child("groupSet"))...)
	}
	slices.Sort(lt.SecurityGroups)
	lt.SecurityGroups = slices.Compact(lt.SecurityGroups)
	return lt, "", "", nil
}

// childTexts are the non-empty texts of n's children, or of their
// children (a list renders as <item>sg-1</item> or
// <item><groupId>sg-1</groupId></item>).
func childTexts(n *xnode) []string {
	if n == nil {
		return nil
	}
	var out []string
	for _, c := range n.Children {
		if t := strings.TrimSpace(c.Text); t != "" && len(c.Children) == 0 {
			out = append(out, t)
		}
		out = append(out, childTexts(c)...)
	}
	return out
}

func lowerFirst(s string) string { return strings.ToLower(s[:1]) + s[1:] }

// motoRaw calls moto's EC2 and returns its status and whole body.
func (f *front) motoRaw(ctx context.Context, region string, form url.Values) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.moto.String()+"/", strings.NewReader(form.Encode()))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	req.Header.Set("Authorization", fmt.Sprintf("AWS4-HMAC-SHA256 Credential=%s/20260101/%s/ec2/aws4_request, SignedHeaders=host, Signature=0", AccessKeyID, region))
	resp, err := f.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("calling moto ec2 %s: %w", form.Get("Action"), err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("reading moto ec2 %s: %w", form.Get("Action"), err)
	}
	return resp.StatusCode, b, nil
}

var (
	errCodeRE = regexp.MustCompile(`<Code>([^<]*)</Code>`)
	errMsgRE  = regexp.MustCompile(`(?s)<Message>(.*?)</Message>`)
)

func ec2ErrorOf(body []byte) (string, string) {
	var code, msg string
	if m := errCodeRE.FindSubmatch(body); m != nil {
		code = string(m[1])
	}
	if m := errMsgRE.FindSubmatch(body); m != nil {
		msg = strings.TrimSpace(string(m[1]))
	}
	return code, msg
}

// candidate is one override evaluated against the front's tables.
type candidate struct {
	cfg, idx int
	o        fleetOverride
	lt       *launchTemplate
	subnet   subnetInfo
	imageID  string
	// group is the template's placement group, nil without one.
	group *PlacementGroup
	price float64
	res   *reservation
	// failCode is set when the override cannot launch at all.
	failCode, failMsg string
}

type fleetError struct {
	c           *candidate
	code, msg   string
	capacityTyp string
}

// createFleet serves instant fleets: it picks overrides by the request's
// allocation strategy from the front's prices and capacity, reports the
// offerings it could not use in Errors, and launches the chosen ones in
// moto with the launch template's attributes. Other fleet types go to moto.
func (f *front) createFleet(ctx context.Context, w http.ResponseWriter, c *call) bool {
	if c.Form.Get("Type") != "instant" {
		return false
	}
	req, code, msg := parseFleetRequest(c.Form)
	if req == nil {
		writeError(w, c, http.StatusBadRequest, code, msg)
		return true
	}
	req.principal = c.Principal != nil
	types, err := f.instanceTypes(ctx)
	if err != nil {
		writeError(w, c, http.StatusInternalServerError, "InternalError", err.Error())
		return true
	}
	var unknown []string
	for _, cfg := range req.Configs {
		for _, o := range cfg.Overrides {
			if _, ok := types[o.InstanceType]; !ok && !slices.Contains(unknown, o.InstanceType) {
				unknown = append(unknown, o.InstanceType)
			}
		}
	}
	if len(unknown) > 0 {
		writeError(w, c, http.StatusBadRequest, "InvalidParameterValue",
			fmt.Sprintf("The following supplied instance types do not exist: [%s]", strings.Join(unknown, ", ")))
		return true
	}
	// A dry run launches nothing (upstream Karpenter's EC2NodeClass
	// validation sends one); EC2 answers a request it would accept so.
	if c.Form.Get("DryRun") == "true" {
		writeError(w, c, http.StatusPreconditionFailed, "DryRunOperation", "Request would have succeeded, but DryRun flag is set.")
		return true
	}

	s := f.ec2
	cands, free, release, err := f.admitFleet(ctx, c.Region, req, types)
	if err != nil {
		writeError(w, c, http.StatusInternalServerError, "InternalError", err.Error())
		return true
	}
	defer release()
	if s.admitted != nil {
		s.admitted()
	}
	fleetID := "fleet-" + uuid.NewString()
	type group struct {
		c   *candidate
		ids []string
	}
	var groups []*group
	var errs []fleetError
	failed := map[*candidate]fleetError{}
	for _, cd := range cands {
		if cd.failCode != "" {
			failed[cd] = fleetError{cd, cd.failCode, cd.failMsg, req.CapacityType}
		}
	}
	var first *candidate
	for unit := 0; unit < req.Total; unit++ {
		var ok []*candidate
		for _, cd := range cands {
			if _, bad := failed[cd]; bad {
				continue
			}
			if n := f.remaining(cd, req.CapacityType); n == 0 {
				failed[cd] = f.noCapacity(cd, req.CapacityType)
				continue
			}
			if n, ok := free[cd.subnet.ID]; ok && n <= 0 {
				failed[cd] = noAddresses(cd, req.CapacityType)
				continue
			}
			if _, code, msg := f.ec2.groupRoom(cd); code != "" {
				failed[cd] = fleetError{cd, code, msg, req.CapacityType}
				continue
			}
			ok = append(ok, cd)
		}
		if len(ok) == 0 {
			break
		}
		need := req.Total - unit
		sort.SliceStable(ok, func(i, j int) bool { return f.better(ok[i], ok[j], req, need) })
		chosen := ok[0]
		// A pool of unlimited capacity, once first, stays first for every
		// unit after (launching from it changes no pool's depth, and the
		// order among deep pools does not depend on what is left to
		// launch) until its subnet runs out of addresses: moto launches
		// that run in one RunInstances call instead of one per unit.
		count := 1
		if f.remaining(chosen, req.CapacityType) < 0 {
			count = need
			if n, ok := free[chosen.subnet.ID]; ok {
				count = min(count, n)
			}
			if room, _, _ := f.ec2.groupRoom(chosen); room >= 0 {
				count = min(count, room)
			}
		}
		ids, code, msg, err := f.runInstances(ctx, c.Region, chosen, req, fleetID, count)
		if err != nil {
			writeError(w, c, http.StatusInternalServerError, "InternalError", err.Error())
			return true
		}
		if len(ids) == 0 {
			failed[chosen] = fleetError{chosen, code, msg, req.CapacityType}
			unit-- // the unit is still to be launched, from another pool
			continue
		}
		unit += len(ids) - 1
		if _, ok := free[chosen.subnet.ID]; ok {
			free[chosen.subnet.ID] -= len(ids)
		}
		if first == nil {
			first = chosen
		}
		found := false
		for _, g := range groups {
			if g.c == chosen {
				g.ids, found = append(g.ids, ids...), true
			}
		}
		if !found {
			groups = append(groups, &group{chosen, ids})
		}
	}
	launchedAny := first != nil
	if launchedAny {
		// Wakes the booter, which lists the instances with their records
		// (runInstances stores those before moto serves another call).
		defer s.announceLaunch()
	}
	shortfall := 0
	for _, g := range groups {
		shortfall += len(g.ids)
	}
	shortfall = req.Total - shortfall
	for _, cd := range cands {
		fe, bad := failed[cd]
		if !bad {
			continue
		}
		// EC2 reports the pools it tried before the one it launched from;
		// with nothing launched, or less than the target, every pool it
		// tried (the reason the rest of the target is missing).
		if !launchedAny || shortfall > 0 || strings.HasPrefix(req.Strategy, "capacity-optimized") || preferred(cd, first, req) {
			errs = append(errs, fe)
		}
	}

	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	b.WriteString(`<CreateFleetResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>` + newRequestID() + `</requestId>`)
	b.WriteString("<fleetId>" + fleetID + "</fleetId><errorSet>")
	for _, e := range errs {
		b.WriteString("<item>" + req.ltAndOverrides(e.c) + "<lifecycle>" + lifecycleOf(req.CapacityType) + "</lifecycle><errorCode>" + xmlText(e.code) + "</errorCode><errorMessage>" + xmlText(e.msg) + "</errorMessage></item>")
	}
	b.WriteString("</errorSet><fleetInstanceSet>")
	for _, g := range groups {
		b.WriteString("<item>" + req.ltAndOverrides(g.c) + "<lifecycle>" + lifecycleOf(req.CapacityType) + "</lifecycle><instanceIds>")
		for _, id := range g.ids {
			b.WriteString("<item>" + id + "</item>")
		}
		b.WriteString("</instanceIds><instanceType>" + xmlText(g.c.o.InstanceType) + "</instanceType></item>")
	}
	b.WriteString("</fleetInstanceSet></CreateFleetResponse>")
	writeXML(w, []byte(b.String()))
	return true
}

func lifecycleOf(capacityType string) string {
	if capacityType == CapacityTypeSpot {
		return "spot"
	}
	return "on-demand"
}

// ltAndOverrides echoes the request's template and the override, as EC2
// does in both the errors and the instances of the answer.
func (req *fleetRequest) ltAndOverrides(cd *candidate) string {
	cfg := req.Configs[cd.cfg]
	var b strings.Builder
	b.WriteString("<launchTemplateAndOverrides><launchTemplateSpecification>")
	if cfg.LTID != "" {
		b.WriteString("<launchTemplateId>" + xmlText(cfg.LTID) + "</launchTemplateId>")
	}
	if cfg.LTName != "" {
		b.WriteString("<launchTemplateName>" + xmlText(cfg.LTName) + "</launchTemplateName>")
	}
	if cfg.Version != "" {
		b.WriteString("<version>" + xmlText(cfg.Version) + "</version>")
	}
	b.WriteString("</launchTemplateSpecification><overrides><instanceType>" + xmlText(cd.o.InstanceType) + "</instanceType>")
	if cd.o.SubnetID != "" {
		b.WriteString("<subnetId>" + xmlText(cd.o.SubnetID) + "</subnetId>")
	}
	if cd.o.Zone != "" {
		b.WriteString("<availabilityZone>" + xmlText(cd.o.Zone) + "</availabilityZone>")
	}
	if cd.o.ImageID != "" {
		b.WriteString("<imageId>" + xmlText(cd.o.ImageID) + "</imageId>")
	}
	if cd.o.MaxPrice != "" {
		b.WriteString("<maxPrice>" + xmlText(cd.o.MaxPrice) + "</maxPrice>")
	}
	if cd.o.HasPriority {
		b.WriteString("<priority>" + strconv.FormatFloat(cd.o.Priority, 'f', -1, 64) + "</priority>")
	}
	b.WriteString("</overrides></launchTemplateAndOverrides>")
	return b.String()
}

// admitFleet evaluates the request's overrides and takes the fleet's
// slot in launchMu, returning the candidates, the free addresses of their
// subnets and the slot's release. EC2 serves concurrent fleets
// concurrently, so a fleet that launches only from unlimited pools and
// whose subnets have room for it beside the shared fleets in flight
// shares the slot; any other is evaluated again holding it alone.
func (f *front) admitFleet(ctx context.Context, region string, req *fleetRequest, types map[string]typeInfo) ([]*candidate, map[string]int, func(), error) {
	s := f.ec2
	s.launchMu.RLock()
	cands, err := f.evaluate(ctx, region, req, types)
	if err == nil && f.unlimited(cands, req.CapacityType) {
		var free map[string]int
		var room bool
		if free, room, err = f.admitShared(ctx, region, cands, req.Total); err == nil && room {
			return cands, free, func() {
				s.admitMu.Lock()
				s.sharedInFlight -= req.Total
				s.admitMu.Unlock()
				s.launchMu.RUnlock()
			}, nil
		}
	}
	s.launchMu.RUnlock()
	if err != nil {
		return nil, nil, nil, err
	}
	s.launchMu.Lock()
	if cands, err = f.evaluate(ctx, region, req, types); err == nil {
		var free map[string]int
		if free, err = f.freeAddresses(ctx, region, cands); err == nil {
			return cands, free, s.launchMu.Unlock, nil
		}
	}
	s.launchMu.Unlock()
	return nil, nil, nil, err
}

// unlimited: no candidate that can launch draws on a count, so the fleet
// cannot take what a concurrent fleet reads as available.
func (f *front) unlimited(cands []*candidate, capacityType string) bool {
	for _, cd := range cands {
		if cd.failCode == "" && (cd.res != nil || cd.group != nil || f.remaining(cd, capacityType) >= 0) {
			return false
		}
	}
	return true
}

// admitShared reads the free addresses of the candidates' subnets and, when
// each has room for total instances beside every shared fleet in flight,
// counts this fleet's among those. A fleet in flight may already show in
// moto's count; it is subtracted again, which can only refuse room, never
// grant too much.
func (f *front) admitShared(ctx context.Context, region string, cands []*candidate, total int) (map[string]int, bool, error) {
	s := f.ec2
	s.admitMu.Lock()
	defer s.admitMu.Unlock()
	free, err := f.freeAddresses(ctx, region, cands)
	if err != nil {
		return nil, false, err
	}
	for _, n := range free {
		if n-s.sharedInFlight < total {
			return nil, false, nil
		}
	}
	s.sharedInFlight += total
	return free, true, nil
}

// evaluate resolves every override's template, subnet, image and price and
// marks those that can never launch (architecture, zone, reservation).
func (f *front) evaluate(ctx context.Context, region string, req *fleetRequest, types map[string]typeInfo) ([]*candidate, error) {
	var out []*candidate
	for ci, cfg := range req.Configs {
		lt, code, msg, err := f.launchTemplate(ctx, region, cfg)
		if err != nil {
			return nil, err
		}
		if lt != nil && req.principal {
			if c, m := f.consist.launchRefusal(cfg, lt); c != "" {
				lt, code, msg = nil, c, m
			}
		}
		for _, o := range cfg.Overrides {
			cd := &candidate{cfg: ci, idx: len(out), o: o, lt: lt}
			out = append(out, cd)
			if lt == nil {
				cd.failCode, cd.failMsg = code, msg
				continue
			}
			sub, ok, err := f.subnetFor(ctx, region, o)
			if err != nil {
				return nil, err
			}
			if !ok {
				cd.failCode, cd.failMsg = "InvalidSubnetID.NotFound", fmt.Sprintf("The subnet ID '%s' does not exist", o.SubnetID)
				continue
			}
			cd.subnet = sub
			cd.imageID = o.ImageID
			if cd.imageID == "" {
				cd.imageID = lt.ImageID
			}
			if cd.imageID == "" {
				cd.failCode, cd.failMsg = "MissingParameter", "The request must contain the parameter ImageId"
				continue
			}
			img, ok, err := f.image(ctx, region, cd.imageID)
			if err != nil {
				return nil, err
			}
			if !ok {
				cd.failCode, cd.failMsg = "InvalidAMIID.NotFound", fmt.Sprintf("The image id '[%s]' does not exist", cd.imageID)
				continue
			}
			ti := types[o.InstanceType]
			if img.Arch != "" && !slices.Contains(ti.Archs, img.Arch) {
				cd.failCode = "InvalidParameterValue"
				cd.failMsg = fmt.Sprintf("The architecture '%s' of the specified instance type does not match the architecture '%s' of the specified AMI. "+
					"Specify an instance type and an AMI that have matching architectures, and try again. "+
					"You can use 'describe-instance-types' or 'describe-images' to discover the architecture of the instance type or AMI.",
					strings.Join(ti.Archs, ","), img.Arch)
				continue
			}
			offered, err := f.offeredIn(ctx, region, sub.Zone, o.InstanceType)
			if err != nil {
				return nil, err
			}
			if !offered {
				cd.failCode = "Unsupported"
				cd.failMsg = fmt.Sprintf("Your requested instance type (%s) is not supported in your requested Availability Zone (%s). "+
					"Please retry your request by not specifying an Availability Zone or choosing another Availability Zone.", o.InstanceType, sub.Zone)
				continue
			}
			g, code, msg := f.ec2.templateGroup(region, lt)
			if code != "" {
				cd.failCode, cd.failMsg = code, msg
				continue
			}
			cd.group = g
			if code, msg := marketMismatch(req.CapacityType, lt, f.reservationType(lt.ReservationID)); code != "" {
				cd.failCode, cd.failMsg = code, msg
				continue
			}
			if lt.ReservationID != "" {
				res, code, msg := f.checkReservation(region, lt.ReservationID, o.InstanceType, sub.Zone)
				if code != "" {
					cd.failCode, cd.failMsg = code, msg
					continue
				}
				cd.res = res
				continue // reserved capacity is already paid for: price 0
			}
			switch req.CapacityType {
			case CapacityTypeSpot:
				p, _, ok := f.spot.price(region, sub.Zone, o.InstanceType)
				cd.price = p
				if !ok {
					cd.price = math.Inf(1)
				}
				if o.MaxPrice != "" {
					if max, err := strconv.ParseFloat(o.MaxPrice, 64); err == nil && ok && max < p {
						cd.failCode = "SpotMaxPriceTooLow"
						cd.failMsg = fmt.Sprintf("Your Spot request price of %s is lower than the minimum required Spot request fulfillment price of %s.", o.MaxPrice, strconv.FormatFloat(p, 'f', 6, 64))
					}
				}
			default:
				p, ok := f.prices.onDemand(o.InstanceType, region)
				cd.price = p
				if !ok {
					cd.price = math.Inf(1)
				}
			}
		}
	}
	return out, nil
}

// reservationType is the type of the reservation id names, "" when there
// is none.
func (f *front) reservationType(id string) string {
	if id == "" {
		return ""
	}
	s := f.ec2
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.reservations[id]; ok {
		return r.ReservationType
	}
	return ""
}

// marketMismatch is EC2's refusal of a fleet whose market does not fit the
// template's reservation: a capacity block launches only with the
// capacity-block market type in the template and capacity-block as the
// fleet's default target capacity type, and those two mean nothing
// without a capacity block to launch into; an ordinary reservation takes
// on-demand launches only.
func marketMismatch(fleetType string, lt *launchTemplate, resType string) (string, string) {
	const code = "InvalidParameterCombination"
	block := lt.MarketType == ReservationTypeCapacityBlock || fleetType == ReservationTypeCapacityBlock
	switch {
	case resType == ReservationTypeCapacityBlock && (lt.MarketType != ReservationTypeCapacityBlock || fleetType != ReservationTypeCapacityBlock):
		return code, fmt.Sprintf("To launch into Capacity Block %s, the launch template must set the market type capacity-block and the fleet's DefaultTargetCapacityType must be capacity-block.", lt.ReservationID)
	case resType != ReservationTypeCapacityBlock && block:
		return code, "The capacity-block market type and DefaultTargetCapacityType capacity-block require a launch template that targets a Capacity Block."
	case resType != "" && fleetType == CapacityTypeSpot:
		return code, fmt.Sprintf("Spot Instances cannot launch into Capacity Reservation %s.", lt.ReservationID)
	}
	return "", ""
}

func (f *front) subnetFor(ctx context.Context, region string, o fleetOverride) (subnetInfo, bool, error) {
	if o.SubnetID != "" {
		return f.subnet(ctx, region, o.SubnetID, "")
	}
	zone := o.Zone
	if zone == "" {
		zones, err := f.regionZones(ctx, region)
		if err != nil {
			return subnetInfo{}, false, err
		}
		if len(zones) == 0 {
			return subnetInfo{}, false, nil
		}
		zone = zones[0].Name
	}
	return f.subnet(ctx, region, "", zone)
}

// remaining is how many more instances the candidate's pool can launch;
// -1 is unlimited.
func (f *front) remaining(cd *candidate, capacityType string) int {
	s := f.ec2
	s.mu.Lock()
	defer s.mu.Unlock()
	if cd.res != nil {
		return cd.res.available()
	}
	n, ok := s.capacity[capKey{cd.o.InstanceType, cd.subnet.Zone, capacityPool(capacityType)}]
	if !ok {
		return -1
	}
	return n
}

func capacityPool(capacityType string) string {
	if capacityType == CapacityTypeSpot {
		return CapacityTypeSpot
	}
	return CapacityTypeOnDemand
}

func (f *front) noCapacity(cd *candidate, capacityType string) fleetError {
	switch {
	case cd.res != nil:
		return fleetError{cd, "ReservationCapacityExceeded", fmt.Sprintf("Insufficient capacity in the Capacity Reservation %s.", cd.res.ID), capacityType}
	case capacityType == CapacityTypeSpot:
		return fleetError{cd, "InsufficientInstanceCapacity", "There is no Spot capacity available that matches your request.", capacityType}
	default:
		return fleetError{cd, "InsufficientInstanceCapacity", fmt.Sprintf("We currently do not have sufficient %s capacity in the Availability Zone you requested (%s). "+
			"Our system will be working on provisioning additional capacity. You can currently get %s capacity by not specifying an Availability Zone in your request or choosing other Availability Zones.",
			cd.o.InstanceType, cd.subnet.Zone, cd.o.InstanceType), capacityType}
	}
}

// noAddresses is EC2's answer for an override whose subnet has no free
// address left; EC2 reports it per override, like a capacity error.
func noAddresses(cd *candidate, capacityType string) fleetError {
	return fleetError{cd, "InsufficientFreeAddressesInSubnet",
		fmt.Sprintf("There are not enough free addresses in subnet '%s' to satisfy the requested number of instances.", cd.subnet.ID), capacityType}
}

// freeAddresses is the AvailableIpAddressCount of every subnet the
// candidates launch into, asked of moto once per fleet (admitFleet keeps
// it exact against other fleets; the loop counts this fleet's own
// launches).
// moto lets RunInstances go on past zero only until its address generator
// runs dry, and then answers an HTML 500, so the front checks first.
func (f *front) freeAddresses(ctx context.Context, region string, cands []*candidate) (map[string]int, error) {
	var ids []string
	for _, cd := range cands {
		if cd.failCode == "" && cd.subnet.ID != "" && !slices.Contains(ids, cd.subnet.ID) {
			ids = append(ids, cd.subnet.ID)
		}
	}
	free := map[string]int{}
	if len(ids) == 0 {
		return free, nil
	}
	form := ec2Form("DescribeSubnets")
	for i, id := range ids {
		form.Set(fmt.Sprintf("SubnetId.%d", i+1), id)
	}
	doc, err := f.motoXML(ctx, region, form)
	if err != nil {
		return nil, fmt.Errorf("describing the fleet's subnets: %w", err)
	}
	for _, it := range doc.items("subnetSet") {
		n, err := strconv.Atoi(it.text("availableIpAddressCount"))
		if err != nil {
			return nil, fmt.Errorf("subnet %s: available address count %q: %w", it.text("subnetId"), it.text("availableIpAddressCount"), err)
		}
		free[it.text("subnetId")] = n
	}
	return free, nil
}

func priorityOf(cd *candidate) float64 {
	if cd.o.HasPriority {
		return cd.o.Priority
	}
	return math.Inf(1) // no priority is the lowest priority
}

// better orders pools for the allocation strategy: need is how many
// instances are still to launch.
func (f *front) better(a, b *candidate, req *fleetRequest, need int) bool {
	capA, capB := f.remaining(a, req.CapacityType), f.remaining(b, req.CapacityType)
	depth := func(n int) float64 {
		if n < 0 {
			return math.Inf(1)
		}
		return float64(n)
	}
	switch req.Strategy {
	case "prioritized":
		if pa, pb := priorityOf(a), priorityOf(b); pa != pb {
			return pa < pb
		}
	case "capacity-optimized":
		if depth(capA) != depth(capB) {
			return depth(capA) > depth(capB)
		}
		return a.idx < b.idx
	case "capacity-optimized-prioritized":
		if depth(capA) != depth(capB) {
			return depth(capA) > depth(capB)
		}
		if pa, pb := priorityOf(a), priorityOf(b); pa != pb {
			return pa < pb
		}
		return a.idx < b.idx
	case "price-capacity-optimized":
		// Pools deep enough for the rest of the request first, then price.
		deepA, deepB := capA < 0 || capA >= need, capB < 0 || capB >= need
		if deepA != deepB {
			return deepA
		}
	}
	if a.price != b.price {
		return a.price < b.price
	}
	return a.idx < b.idx
}

// preferred reports whether the strategy ranks a before b on price or
// priority alone, i.e. whether EC2 would have tried a first.
func preferred(a, b *candidate, req *fleetRequest) bool {
	if req.Strategy == "prioritized" {
		if pa, pb := priorityOf(a), priorityOf(b); pa != pb {
			return pa < pb
		}
	}
	if a.price != b.price {
		return a.price < b.price
	}
	return a.idx < b.idx
}

// runInstances launches count instances of the candidate in moto with the
// template's attributes, in one RunInstances call (all or none), and
// records them; code and msg are moto's refusal, if any.
func (f *front) runInstances(ctx context.Context, region string, cd *candidate, req *fleetRequest, fleetID string, count int) ([]string, string, string, error) {
	types, err := f.instanceTypes(ctx)
	if err != nil {
		return nil, "", "", err
	}
	if code, msg := checkInterfaces(types[cd.o.InstanceType], cd.lt.Interfaces); code != "" {
		return nil, code, msg, nil
	}
	n := strconv.Itoa(count)
	form := ec2Form("RunInstances", "MinCount", n, "MaxCount", n, "InstanceType", cd.o.InstanceType,
		"SubnetId", cd.subnet.ID, "ImageId", cd.imageID,
		"LaunchTemplate.LaunchTemplateId", cd.lt.ID, "LaunchTemplate.Version", cd.lt.Version)
	// moto's RunInstances takes these from explicit parameters only.
	if cd.lt.ProfileArn != "" {
		form.Set("IamInstanceProfile.Arn", cd.lt.ProfileArn)
	} else if cd.lt.ProfileName != "" {
		form.Set("IamInstanceProfile.Name", cd.lt.ProfileName)
	}
	for k, v := range cd.lt.Metadata {
		form.Set("MetadataOptions."+k, v)
	}
	// moto takes a template's top-level SecurityGroupIds but not the
	// groups of its network interfaces (upstream Karpenter's templates
	// name them there); EC2 gives the instance both.
	for i, g := range cd.lt.SecurityGroups {
		form.Set(fmt.Sprintf("SecurityGroupId.%d", i+1), g)
	}
	if req.CapacityType == CapacityTypeSpot {
		form.Set("InstanceMarketOptions.MarketType", "spot")
	}
	for k, v := range req.Tags {
		form[k] = v
	}
	s := f.ec2
	s.motoMu.Lock()
	defer s.motoMu.Unlock()
	status, body, err := f.motoRaw(ctx, region, form)
	if err != nil {
		return nil, "", "", err
	}
	if status != http.StatusOK {
		code, msg := ec2ErrorOf(body)
		if code == "" {
			code, msg = "InternalError", firstLine(body)
		}
		return nil, code, msg, nil
	}
	doc, err := parseXML(body)
	if err != nil {
		return nil, "", "", err
	}
	items := doc.items("instancesSet")
	if len(items) != count {
		return nil, "", "", fmt.Errorf("moto's RunInstances answered %d instances for %d", len(items), count)
	}
	ids := make([]string, 0, count)
	s.mu.Lock()
	for _, item := range items {
		id := item.text("instanceId")
		ids = append(ids, id)
		rec := &launched{ID: id, FleetID: fleetID, Region: region, ReservationPreference: cd.lt.ReservationPref, Interfaces: cd.lt.Interfaces, Tenancy: cd.lt.Tenancy, Zone: cd.subnet.Zone}
		if len(cd.lt.Devices) > 0 && !slices.Contains(cd.lt.Devices, "/dev/sda1") {
			rec.DropDevice = "/dev/sda1"
		}
		if cd.group != nil {
			rec.PlacementGroupID = cd.group.ID
			rec.Partition = s.partitionFor(cd.group, cd.lt.PartitionNumber)
		}
		if cd.res != nil {
			cd.res.used[id] = true
			rec.ReservationID = cd.res.ID
			rec.CapacityBlock = cd.res.ReservationType == ReservationTypeCapacityBlock
		} else if k := (capKey{cd.o.InstanceType, cd.subnet.Zone, capacityPool(req.CapacityType)}); s.capacity[k] > 0 {
			s.capacity[k]--
		}
		s.instances[id] = rec
	}
	s.mu.Unlock()
	f.consist.launched(ids...)
	return ids, "", "", nil
}

// describeInstances adds what moto drops to the instances CreateFleet
// launched: the capacity reservation, the capacity-block lifecycle, the
// fleet tag, and the block devices EC2 would attach.
func (f *front) describeInstances(ctx context.Context, w http.ResponseWriter, c *call) bool {
	s := f.ec2
	s.mu.Lock()
	n := len(s.instances)
	s.mu.Unlock()
	hide := c.Principal != nil && f.consist.anyPending(f.consist.instances)
	if n == 0 && !hide {
		return false
	}
	status, body, err := f.motoRaw(ctx, c.Region, c.Form)
	if err != nil || status != http.StatusOK {
		return false // the normal path answers moto's error as AWS would
	}
	doc, err := parseXML(body)
	if err != nil {
		return false
	}
	if hide {
		f.hideUnseenInstances(doc)
	}
	s.mu.Lock()
	for _, r := range doc.items("reservationSet") {
		for _, inst := range r.items("instancesSet") {
			if rec := s.instances[inst.text("instanceId")]; rec != nil {
				// Once its reservation is no longer active (expired,
				// cancelled) an instance runs on as plain on-demand
				// capacity: EC2 stops reporting the reservation.
				res := s.reservations[rec.ReservationID]
				augment(inst, rec, res != nil && res.State == ReservationStateActive)
				overlayPlacementGroup(inst, rec, s.pgs.byID[rec.PlacementGroupID])
			}
		}
	}
	s.mu.Unlock()
	writeXML(w, doc.bytes())
	return true
}

func augment(inst *xnode, rec *launched, inReservation bool) {
	pref := rec.ReservationPreference
	if pref == "" {
		pref = "open"
	}
	spec := el("capacityReservationSpecification", leaf("capacityReservationPreference", pref))
	if rec.ReservationID != "" && inReservation {
		spec = el("capacityReservationSpecification", el("capacityReservationTarget", leaf("capacityReservationId", rec.ReservationID)))
		inst.set(leaf("capacityReservationId", rec.ReservationID))
	}
	inst.set(spec)
	if rec.CapacityBlock {
		inst.set(leaf("instanceLifecycle", "capacity-block"))
	}
	if bdm := inst.child("blockDeviceMapping"); bdm != nil && rec.DropDevice != "" {
		kept := bdm.Children[:0]
		for _, it := range bdm.Children {
			if it.text("deviceName") != rec.DropDevice {
				kept = append(kept, it)
			}
		}
		bdm.Children = kept
	}
	tags := inst.child("tagSet")
	if tags == nil {
		tags = el("tagSet")
		inst.set(tags)
	}
	tags.Children = append(tags.Children, el("item", leaf("key", "aws:ec2:fleet-id"), leaf("value", rec.FleetID)))
	overlayInterfaces(inst, rec.ID, rec.Interfaces)
	overlayTenancy(inst, rec.Tenancy)
}

// terminateInstances forwards to moto and hands the capacity of reserved
// instances back to their reservation, as EC2 does.
func (f *front) terminateInstances(ctx context.Context, w http.ResponseWriter, c *call) bool {
	status, body, err := f.motoRaw(ctx, c.Region, c.Form)
	if err != nil || status != http.StatusOK {
		return false
	}
	s := f.ec2
	s.mu.Lock()
	for _, id := range ec2List(c.Form, "InstanceId") {
		if rec := s.instances[id]; rec != nil {
			rec.Terminated = true
			if r := s.reservations[rec.ReservationID]; r != nil {
				delete(r.used, id)
			}
		}
	}
	s.mu.Unlock()
	writeXML(w, body)
	return true
}
