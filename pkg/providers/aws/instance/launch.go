package instance

// CreateFleet requests: building a launch from a Request, and reading
// the fleet errors EC2 answers with.

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/metrics"
)

// newLaunch is req's CreateFleet request for one instance, before
// batching: the configs capped at MaxInstanceTypes types, the fleet's
// capacity type and allocation strategy, and the shared tags.
func (p *Provider) newLaunch(req Request) (*launch, error) {
	if req.CapacityType == CapacityTypeReserved && req.ReservationType == "" {
		req.ReservationType = ReservationTypeDefault
	}
	configs := capOverrides(req.Configs, MaxInstanceTypes)
	rankOf := priceRanks(configs)
	prioritized := rankOf != nil
	if len(configs) == 0 {
		return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("all requested instance types were unavailable during launch: no %s offering for nodeclaim %s", req.CapacityType, req.NodeClaimName))
	}
	l := &launch{req: req, zoneOf: map[string]string{}, zoneIDOf: map[string]string{}, imageOf: map[string]string{}, reservationOf: map[string]string{}, groupsOf: map[string][]string{}}
	var ltConfigs []ec2types.FleetLaunchTemplateConfigRequest
	for _, c := range configs {
		if (req.CapacityType == CapacityTypeReserved) != (c.CapacityReservationID != "") {
			return nil, fmt.Errorf("launching nodeclaim %s: launch template %s targets reservation %q in a %s launch", req.NodeClaimName, c.LaunchTemplateName, c.CapacityReservationID, req.CapacityType)
		}
		l.imageOf[c.LaunchTemplateName] = c.ImageID
		l.groupsOf[c.LaunchTemplateName] = c.SecurityGroupIDs
		if c.CapacityReservationID != "" {
			l.reservationOf[c.LaunchTemplateName] = c.CapacityReservationID
		}
		overrides := make([]ec2types.FleetLaunchTemplateOverridesRequest, 0, len(c.Overrides))
		for _, o := range c.Overrides {
			l.zoneOf[o.SubnetID] = o.Zone
			if o.ZoneID != "" {
				l.zoneIDOf[o.Zone] = o.ZoneID
				p.zoneIDs.Store(o.Zone, o.ZoneID)
			}
			override := ec2types.FleetLaunchTemplateOverridesRequest{
				InstanceType:     ec2types.InstanceType(o.InstanceType),
				SubnetId:         aws.String(o.SubnetID),
				AvailabilityZone: aws.String(o.Zone),
			}
			if prioritized {
				override.Priority = aws.Float64(rankOf[o.Price])
			}
			overrides = append(overrides, override)
		}
		ltConfigs = append(ltConfigs, ec2types.FleetLaunchTemplateConfigRequest{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{
				LaunchTemplateName: aws.String(c.LaunchTemplateName), Version: aws.String("$Latest"),
			},
			Overrides: overrides,
		})
	}
	// The shared tags only: the NodeClaim's own tag is added per launch,
	// so that identical launches for different NodeClaims hash alike.
	l.tags = Tags(p.clusterName, req.NodePoolName, "", req.NodeClassName, req.ClassTags)
	l.input = &ec2.CreateFleetInput{
		Type:                  ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: ltConfigs,
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			DefaultTargetCapacityType: targetCapacityType(req),
			TotalTargetCapacity:       aws.Int32(1),
		},
	}
	if req.Context != "" {
		l.input.Context = aws.String(req.Context)
	}
	switch {
	case req.CapacityType == CapacityTypeSpot && prioritized:
		l.input.SpotOptions = &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyCapacityOptimizedPrioritized}
	case req.CapacityType == CapacityTypeSpot:
		l.input.SpotOptions = &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized}
	case prioritized && req.ReservationType != ReservationTypeCapacityBlock:
		l.input.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyPrioritized}
	default:
		l.input.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice}
	}
	return l, nil
}

// priceRanks numbers the overrides' distinct prices from 0 (the cheapest)
// up when a NodeOverlay set any of them (nil otherwise): an override's
// priority is its price's rank. Upstream sends the price itself; EC2
// documents priorities as whole numbers from 0, and the ranks keep the
// order the prices give.
func priceRanks(configs []LaunchConfig) map[float64]float64 {
	var prices []float64
	overlaid := false
	for _, c := range configs {
		for _, o := range c.Overrides {
			prices = append(prices, o.Price)
			overlaid = overlaid || o.PriceOverlaid
		}
	}
	if !overlaid {
		return nil
	}
	sort.Float64s(prices)
	prices = slices.Compact(prices)
	out := make(map[float64]float64, len(prices))
	for i, p := range prices {
		out[p] = float64(i)
	}
	return out
}

// targetCapacityType is the fleet's DefaultTargetCapacityType: a capacity
// block launches only as capacity-block, and an ordinary reservation is
// on-demand capacity the templates target.
func targetCapacityType(req Request) ec2types.DefaultTargetCapacityType {
	switch {
	case req.CapacityType == CapacityTypeReserved && req.ReservationType == ReservationTypeCapacityBlock:
		return ec2types.DefaultTargetCapacityTypeCapacityBlock
	case req.CapacityType == CapacityTypeReserved:
		return ec2types.DefaultTargetCapacityTypeOnDemand
	}
	return ec2types.DefaultTargetCapacityType(req.CapacityType)
}

// batcherCreateFleet is the batcher label of the CreateFleet batcher.
const batcherCreateFleet = "create_fleet"

// countFailure counts one CreateFleet error entry in
// karpenter_cloudprovider_instance_launch_failures_total, labelled with the
// failed override's zone, zone id and capacity type (those it names, else
// the launch's) and the error code.
func countFailure(e ec2types.CreateFleetError, l *launch) {
	zone, ct := "", l.req.CapacityType
	if lo := e.LaunchTemplateAndOverrides; lo != nil && lo.Overrides != nil {
		zone = aws.ToString(lo.Overrides.AvailabilityZone)
		if zone == "" {
			zone = l.zoneOf[aws.ToString(lo.Overrides.SubnetId)]
		}
	}
	if e.Lifecycle != "" && ct != CapacityTypeReserved {
		ct = capacityTypeOf(e.Lifecycle)
	}
	reason := aws.ToString(e.ErrorCode)
	if reason == "" {
		reason = "Unknown"
	}
	metrics.InstanceLaunchFailuresTotal.WithLabelValues(zone, l.zoneIDOf[zone], ct, reason).Inc()
}

// recordErrors marks the offerings CreateFleet had no capacity for as
// unavailable and returns them, with the reservations it found full. A
// subnet out of addresses counts as the zone having no capacity for the
// offering, as upstream: the next launch goes to another zone (or, once
// the cache entry expires, to the zone's fullest-free subnet, which the
// subnet provider now knows this one is not). A full reservation is the
// reservation's business (the caller's tracker), not the offering's: the
// same type may still launch on-demand there. A zone the launch's
// placement group refused is the group's business too (groupRefused): it
// is marked for the group, and refused reports that one was.
func (p *Provider) recordErrors(errs []ec2types.CreateFleetError, l *launch) (keys []cloudprovider.OfferingKey, full []string, refused bool) {
	seen := map[cloudprovider.OfferingKey]bool{}
	for _, e := range errs {
		countFailure(e, l)
		if e.LaunchTemplateAndOverrides == nil || e.LaunchTemplateAndOverrides.Overrides == nil {
			continue
		}
		o := e.LaunchTemplateAndOverrides.Overrides
		if l.groupRefused(e) {
			refused = true
			if zone := l.zoneOfOverride(o); zone != "" && p.groupZones != nil {
				p.groupZones.MarkZoneUnavailable(l.req.PlacementGroupID, zone)
			}
			continue
		}
		if !unfulfillableCapacityCodes[aws.ToString(e.ErrorCode)] {
			continue
		}
		if aws.ToString(e.ErrorCode) == errNoFreeAddresses && p.subnets != nil && aws.ToString(o.SubnetId) != "" {
			p.subnets.MarkExhausted(aws.ToString(o.SubnetId))
		}
		reservation := l.reservationOfError(e)
		if aws.ToString(e.ErrorCode) == errReservationIsFull {
			if reservation != "" && !slices.Contains(full, reservation) {
				full = append(full, reservation)
			}
			continue
		}
		zone := l.zoneOfOverride(o)
		ct := l.req.CapacityType
		if e.Lifecycle != "" && ct != CapacityTypeReserved {
			ct = capacityTypeOf(e.Lifecycle)
		}
		key := cloudprovider.OfferingKey{InstanceType: string(o.InstanceType), Zone: zone, CapacityType: ct}
		if seen[key] {
			continue
		}
		seen[key] = true
		keys = append(keys, key)
		if p.unavailable != nil {
			p.unavailable.MarkUnavailable(key)
		}
	}
	return keys, full, refused
}

// zoneOfOverride is the zone a fleet error's override names, or the zone
// of its subnet.
func (l *launch) zoneOfOverride(o *ec2types.FleetLaunchTemplateOverrides) string {
	if zone := aws.ToString(o.AvailabilityZone); zone != "" {
		return zone
	}
	return l.zoneOf[aws.ToString(o.SubnetId)]
}

// errGroupInOtherZone is EC2's refusal of a launch into a cluster
// placement group outside the zone its instances are in.
const errGroupInOtherZone = "InvalidPlacementGroup.InUse"

// groupRefused: the fleet error is the launch's placement group refusing
// the override's zone, whatever the instance type: a cluster group whose
// instances are in another zone (ours; upstream leaves the zone to EC2),
// or a rack spread group holding its seven instances in the zone, which
// EC2 reports as insufficient capacity naming the placement group
// (upstream marks the zone unavailable for the group).
func (l *launch) groupRefused(e ec2types.CreateFleetError) bool {
	if l.req.PlacementGroupID == "" {
		return false
	}
	switch code := aws.ToString(e.ErrorCode); {
	case code == errGroupInOtherZone:
		return true
	case code == "InsufficientInstanceCapacity" && l.req.PlacementGroupStrategy == "spread":
		return strings.Contains(strings.ToLower(aws.ToString(e.ErrorMessage)), "placement group")
	}
	return false
}

// reservationOfError is the reservation the failed override's template
// targets, or "".
func (l *launch) reservationOfError(e ec2types.CreateFleetError) string {
	if e.LaunchTemplateAndOverrides == nil || e.LaunchTemplateAndOverrides.LaunchTemplateSpecification == nil {
		return ""
	}
	return l.reservationOf[aws.ToString(e.LaunchTemplateAndOverrides.LaunchTemplateSpecification.LaunchTemplateName)]
}

// reservationsFullError is an insufficient-capacity error that names the
// reservations CreateFleet found full.
type reservationsFullError struct {
	ids []string
	err error
}

func (e *reservationsFullError) Error() string { return e.err.Error() }

func (e *reservationsFullError) Unwrap() error { return e.err }

// FullReservations are the capacity reservations a failed Create found
// full (ReservationCapacityExceeded); the caller's tracker stops offering
// them.
func FullReservations(err error) []string {
	var rf *reservationsFullError
	if errors.As(err, &rf) {
		return rf.ids
	}
	return nil
}

func fleetErrors(errs []ec2types.CreateFleetError) string {
	if len(errs) == 0 {
		return "CreateFleet returned no instances and no errors"
	}
	parts := make([]string, 0, len(errs))
	seen := map[string]bool{}
	for _, e := range errs {
		s := aws.ToString(e.ErrorCode) + ": " + aws.ToString(e.ErrorMessage)
		if !seen[s] {
			seen[s] = true
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "; ")
}

// capOverrides keeps the overrides of the MaxInstanceTypes cheapest instance
// types (by their cheapest override), dropping configs left empty.
func capOverrides(configs []LaunchConfig, limit int) []LaunchConfig {
	cheapest := map[string]float64{}
	for _, c := range configs {
		for _, o := range c.Overrides {
			if p, ok := cheapest[o.InstanceType]; !ok || o.Price < p {
				cheapest[o.InstanceType] = o.Price
			}
		}
	}
	types := make([]string, 0, len(cheapest))
	for t := range cheapest {
		types = append(types, t)
	}
	sort.Slice(types, func(i, j int) bool {
		if cheapest[types[i]] != cheapest[types[j]] {
			return cheapest[types[i]] < cheapest[types[j]]
		}
		return types[i] < types[j]
	})
	keep := map[string]bool{}
	for i, t := range types {
		if i >= limit {
			break
		}
		keep[t] = true
	}
	var out []LaunchConfig
	for _, c := range configs {
		var os []Override
		for _, o := range c.Overrides {
			if keep[o.InstanceType] {
				os = append(os, o)
			}
		}
		if len(os) > 0 {
			c.Overrides = os
			out = append(out, c)
		}
	}
	return out
}
