package awslocal

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// The quotas and limits EC2 and IAM enforce and moto does not, for every
// caller: 50 user tags per resource (aws:-prefixed tags do not count and
// cannot be set), tag key and value lengths, the launch template quota, user
// data size, CreateFleet's limits, and IAM's instance profile quota and tag
// limit.

// LimitOptions set the quotas; zero fields take AWS's defaults.
type LimitOptions struct {
	// Disabled turns every check off.
	Disabled bool
	// TagsPerResource is the user tags a resource may carry (50).
	TagsPerResource int
	// LaunchTemplates is the launch template quota per region (5,000).
	LaunchTemplates int
	// FleetTargetCapacity is the target capacity one EC2 Fleet may ask
	// for (10,000).
	FleetTargetCapacity int
	// FleetPools is the capacity pools (instance type and subnet) one EC2
	// Fleet may name (300).
	FleetPools int
	// InstanceProfiles is IAM's instance profile quota per account (1,000).
	InstanceProfiles int
}

// AWS's defaults.
const (
	DefaultTagsPerResource     = 50
	DefaultLaunchTemplates     = 5000
	DefaultFleetTargetCapacity = 10000
	DefaultFleetPools          = 300
	DefaultInstanceProfiles    = 1000

	maxTagKeyLength   = 128
	maxTagValueLength = 256
	maxUserDataBytes  = 16 * 1024
)

func (o LimitOptions) withDefaults() LimitOptions {
	if o.TagsPerResource == 0 {
		o.TagsPerResource = DefaultTagsPerResource
	}
	if o.LaunchTemplates == 0 {
		o.LaunchTemplates = DefaultLaunchTemplates
	}
	if o.FleetTargetCapacity == 0 {
		o.FleetTargetCapacity = DefaultFleetTargetCapacity
	}
	if o.FleetPools == 0 {
		o.FleetPools = DefaultFleetPools
	}
	if o.InstanceProfiles == 0 {
		o.InstanceProfiles = DefaultInstanceProfiles
	}
	return o
}

// limitError is a refusal: status, code, message.
type limitError struct {
	status    int
	code, msg string
}

func invalidParam(msg string) *limitError {
	return &limitError{http.StatusBadRequest, "InvalidParameterValue", msg}
}

func (o LimitOptions) tooManyTags(resource string, n int) *limitError {
	return &limitError{http.StatusBadRequest, "TagLimitExceeded",
		fmt.Sprintf("The maximum number of tags per resource (%d) was exceeded: %s would have %d.", o.TagsPerResource, resource, n)}
}

// userTagCount counts the tags that count against the limit.
func userTagCount(tags map[string]string) int {
	n := 0
	for k := range tags {
		if !strings.HasPrefix(k, "aws:") {
			n++
		}
	}
	return n
}

// checkTagSet refuses reserved, too long or too many tags on one resource.
func (o LimitOptions) checkTagSet(resource string, tags map[string]string) *limitError {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch {
		case strings.HasPrefix(strings.ToLower(k), "aws:"):
			return invalidParam(fmt.Sprintf("Tag keys starting with 'aws:' are reserved for internal use (%q).", k))
		case k == "" || len(k) > maxTagKeyLength:
			return invalidParam(fmt.Sprintf("Tag key %q must be 1 to %d characters long.", k, maxTagKeyLength))
		case len(tags[k]) > maxTagValueLength:
			return invalidParam(fmt.Sprintf("The value of tag %q is longer than %d characters.", k, maxTagValueLength))
		}
	}
	if n := userTagCount(tags); n > o.TagsPerResource {
		return o.tooManyTags(resource, n)
	}
	return nil
}

// checkLimits refuses a call that would pass a quota or limit; it answers
// the call and returns true when it does.
func (f *front) checkLimits(ctx context.Context, w http.ResponseWriter, c *call) bool {
	o := f.limits
	if o.Disabled {
		return false
	}
	var err *limitError
	var failed error
	switch {
	case c.Service == "ec2":
		err, failed = f.ec2Limits(ctx, c)
	case c.Service == "iam":
		err, failed = f.iamLimits(ctx, c)
	}
	if failed != nil {
		writeError(w, c, http.StatusInternalServerError, internalCode(c), "the local AWS could not check the call's limits: "+failed.Error())
		return true
	}
	if err != nil {
		writeError(w, c, err.status, err.code, err.msg)
		return true
	}
	return false
}

func (f *front) ec2Limits(ctx context.Context, c *call) (*limitError, error) {
	o := f.limits
	switch c.Action {
	case "CreateTags":
		req := formTags(c.Form, "Tag")
		if e := o.checkTagSet("the request", req); e != nil && e.code != "TagLimitExceeded" {
			return e, nil
		}
		ids := ec2List(c.Form, "ResourceId")
		have, err := f.ec2TagsOf(ctx, c.Region, ids)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			merged := map[string]string{}
			for k, v := range have[id] {
				merged[k] = v
			}
			for k, v := range req {
				merged[k] = v
			}
			if n := userTagCount(merged); n > o.TagsPerResource {
				return o.tooManyTags(id, n), nil
			}
		}
	case "CreateLaunchTemplate", "CreateLaunchTemplateVersion":
		if e := o.checkSpecs(c.Form, "TagSpecification"); e != nil {
			return e, nil
		}
		if e := o.checkSpecs(c.Form, "LaunchTemplateData.TagSpecification"); e != nil {
			return e, nil
		}
		if ud := c.Form.Get("LaunchTemplateData.UserData"); ud != "" {
			raw, err := base64.StdEncoding.DecodeString(ud)
			if err != nil {
				return invalidParam("Invalid BASE64 encoding of user data."), nil
			}
			if len(raw) > maxUserDataBytes {
				return invalidParam(fmt.Sprintf("User data is limited to %d bytes (got %d).", maxUserDataBytes, len(raw))), nil
			}
		}
		if c.Action == "CreateLaunchTemplate" {
			n, err := f.launchTemplateCount(ctx, c.Region)
			if err != nil {
				return nil, err
			}
			if n >= o.LaunchTemplates {
				return &limitError{http.StatusBadRequest, "LaunchTemplateLimitExceeded",
					fmt.Sprintf("You've reached the maximum number of launch templates (%d) in this Region.", o.LaunchTemplates)}, nil
			}
		}
	case "RunInstances":
		return f.launchTagLimits(ctx, c, c.Form.Get("LaunchTemplate.LaunchTemplateId"), c.Form.Get("LaunchTemplate.LaunchTemplateName"), c.Form.Get("LaunchTemplate.Version"))
	case "CreateFleet":
		total, _ := strconv.Atoi(c.Form.Get("TargetCapacitySpecification.TotalTargetCapacity"))
		if total > o.FleetTargetCapacity {
			return invalidParam(fmt.Sprintf("The target capacity %d exceeds the maximum of %d per EC2 Fleet.", total, o.FleetTargetCapacity)), nil
		}
		if e, err := f.fleetPoolLimits(ctx, c); e != nil || err != nil {
			return e, err
		}
		for _, n := range listIndexes(c.Form, "LaunchTemplateConfigs") {
			p := fmt.Sprintf("LaunchTemplateConfigs.%d.LaunchTemplateSpecification.", n)
			if e, err := f.launchTagLimits(ctx, c, c.Form.Get(p+"LaunchTemplateId"), c.Form.Get(p+"LaunchTemplateName"), c.Form.Get(p+"Version")); e != nil || err != nil {
				return e, err
			}
		}
	default:
		if strings.HasPrefix(c.Action, "Create") {
			return o.checkSpecs(c.Form, "TagSpecification"), nil
		}
	}
	return nil, nil
}

// checkSpecs checks each tag specification of a create call.
func (o LimitOptions) checkSpecs(form url.Values, prefix string) *limitError {
	specs := tagSpecs(form, prefix)
	types := make([]string, 0, len(specs))
	for t := range specs {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		if e := o.checkTagSet("the "+t, specs[t]); e != nil {
			return e
		}
	}
	return nil
}

// launchTagLimits checks the tags each launched resource gets: the
// template's tag specification merged with the call's, by type.
func (f *front) launchTagLimits(ctx context.Context, c *call, ltID, ltName, version string) (*limitError, error) {
	o := f.limits
	if e := o.checkSpecs(c.Form, "TagSpecification"); e != nil {
		return e, nil
	}
	if ltID == "" && ltName == "" {
		return nil, nil
	}
	t, err := f.templateFor(ctx, c, ltID, ltName, version)
	if err != nil || t == nil {
		return nil, err
	}
	req := tagSpecs(c.Form, "TagSpecification")
	for _, typ := range []string{"instance", "volume", "network-interface", "spot-instances-request"} {
		merged := map[string]string{}
		for k, v := range t.Specs[typ] {
			merged[k] = v
		}
		for k, v := range req[typ] {
			merged[k] = v
		}
		if n := userTagCount(merged); n > o.TagsPerResource {
			return o.tooManyTags("the "+typ, n), nil
		}
	}
	return nil, nil
}

// fleetPoolLimits: at most FleetPools (instance type, subnet) pools, and no
// two subnets of one zone.
func (f *front) fleetPoolLimits(ctx context.Context, c *call) (*limitError, error) {
	pools := map[string]bool{}
	zoneSubnet := map[string]string{}
	for _, n := range listIndexes(c.Form, "LaunchTemplateConfigs") {
		p := fmt.Sprintf("LaunchTemplateConfigs.%d.", n)
		for _, m := range listIndexes(c.Form, p+"Overrides") {
			q := fmt.Sprintf("%sOverrides.%d.", p, m)
			subnet := c.Form.Get(q + "SubnetId")
			pools[c.Form.Get(q+"InstanceType")+"/"+subnet+"/"+c.Form.Get(q+"AvailabilityZone")] = true
			if subnet == "" {
				continue
			}
			s, ok, err := f.subnet(ctx, c.Region, subnet, "")
			if err != nil {
				return nil, err
			}
			if !ok {
				continue // reported per override
			}
			if other, seen := zoneSubnet[s.Zone]; seen && other != subnet {
				return invalidParam(fmt.Sprintf("An EC2 Fleet cannot span different subnets (%s, %s) of the same Availability Zone (%s).", other, subnet, s.Zone)), nil
			}
			zoneSubnet[s.Zone] = subnet
		}
	}
	if len(pools) > f.limits.FleetPools {
		return invalidParam(fmt.Sprintf("An EC2 Fleet may name at most %d capacity pools (instance type and subnet); this one names %d.", f.limits.FleetPools, len(pools))), nil
	}
	return nil, nil
}

func (f *front) launchTemplateCount(ctx context.Context, region string) (int, error) {
	doc, err := f.motoXML(ctx, region, ec2Form("DescribeLaunchTemplates"))
	if err != nil {
		return 0, fmt.Errorf("counting launch templates: %w", err)
	}
	return len(doc.items("launchTemplates")), nil
}

func (f *front) iamLimits(ctx context.Context, c *call) (*limitError, error) {
	o := f.limits
	switch c.Action {
	case "CreateInstanceProfile", "TagInstanceProfile":
		tags := iamTags(c.Form)
		if c.Action == "TagInstanceProfile" {
			prof, found, err := f.instanceProfile(ctx, c.Region, c.Form.Get("InstanceProfileName"))
			if err != nil || !found {
				return nil, err
			}
			for k, v := range prof.tags {
				if _, ok := tags[k]; !ok {
					tags[k] = v
				}
			}
		}
		if len(tags) > o.TagsPerResource {
			return &limitError{http.StatusConflict, "LimitExceeded", fmt.Sprintf("Cannot exceed quota for TagsPerInstanceProfile: %d", o.TagsPerResource)}, nil
		}
		if c.Action == "CreateInstanceProfile" {
			n, err := f.instanceProfileCount(ctx, c.Region)
			if err != nil {
				return nil, err
			}
			if n >= o.InstanceProfiles {
				return &limitError{http.StatusConflict, "LimitExceeded", fmt.Sprintf("Cannot exceed quota for InstanceProfilesPerAccount: %d", o.InstanceProfiles)}, nil
			}
		}
	}
	return nil, nil
}

func (f *front) instanceProfileCount(ctx context.Context, region string) (int, error) {
	n := 0
	marker := ""
	for {
		form := url.Values{"Action": {"ListInstanceProfiles"}, "Version": {"2010-05-08"}, "MaxItems": {"1000"}}
		if marker != "" {
			form.Set("Marker", marker)
		}
		body, err := f.motoCall(ctx, "iam", region, form)
		if err != nil {
			return 0, fmt.Errorf("counting instance profiles: %w", err)
		}
		doc, err := parseXML(body)
		if err != nil {
			return 0, err
		}
		n += len(members(doc, "ListInstanceProfilesResult", "InstanceProfiles"))
		if doc.text("ListInstanceProfilesResult", "IsTruncated") != "true" {
			return n, nil
		}
		marker = doc.text("ListInstanceProfilesResult", "Marker")
	}
}
