package awslocal

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The authorizations each API call needs: the IAM actions, the resource
// ARNs each is authorized against, and the request context, following
// AWS's Service Authorization Reference for the calls the controller makes.
// Calls this file does not know are authorized as their own action on "*".

// ec2ResourceTypes maps an EC2 id prefix to the resource type of its ARN.
var ec2ResourceTypes = map[string]string{
	"i":      "instance",
	"vol":    "volume",
	"eni":    "network-interface",
	"lt":     "launch-template",
	"sg":     "security-group",
	"subnet": "subnet",
	"vpc":    "vpc",
	"ami":    "image",
	"snap":   "snapshot",
	"fleet":  "fleet",
	"sir":    "spot-instances-request",
	"cr":     "capacity-reservation",
	"igw":    "internet-gateway",
	"rtb":    "route-table",
	"pg":     "placement-group",
}

// ec2ARN is the ARN of an EC2 resource; images and snapshots have no
// account field.
func ec2ARN(region, typ, id string) string {
	account := AccountID
	if typ == "image" || typ == "snapshot" {
		account = ""
	}
	return fmt.Sprintf("arn:aws:ec2:%s:%s:%s/%s", region, account, typ, id)
}

func ec2TypeOf(id string) string {
	prefix, _, _ := strings.Cut(id, "-")
	if t, ok := ec2ResourceTypes[prefix]; ok {
		return t
	}
	return "unknown"
}

// authContext builds the requests of one call.
type authContext struct {
	region string
	base   map[string][]string
	out    []AuthRequest
}

func newAuthContext(c *call, p *principal) *authContext {
	now := time.Now().UTC()
	base := map[string][]string{
		"aws:requestedregion":  {c.Region},
		"aws:principalarn":     {p.arn},
		"aws:principalaccount": {AccountID},
		"aws:principaltype":    {"User"},
		"aws:username":         {p.Name},
		"aws:securetransport":  {"true"},
		"aws:currenttime":      {now.Format(time.RFC3339)},
		"aws:epochtime":        {strconv.FormatInt(now.Unix(), 10)},
	}
	if c.Service == "ec2" {
		base["ec2:region"] = []string{c.Region}
	}
	return &authContext{region: c.Region, base: base}
}

// add appends one authorization; ctxs are merged over the base context.
func (a *authContext) add(action, resource string, ctxs ...map[string][]string) {
	m := make(map[string][]string, len(a.base)+8)
	for k, v := range a.base {
		m[k] = v
	}
	for _, c := range ctxs {
		for k, v := range c {
			m[ContextKey(k)] = v
		}
	}
	a.out = append(a.out, AuthRequest{Action: action, Resource: resource, Context: m})
}

// requestTags is the context of tags a request applies: aws:RequestTag/k
// and aws:TagKeys.
func requestTags(tags map[string]string) map[string][]string {
	m := map[string][]string{}
	if len(tags) == 0 {
		return m
	}
	keys := make([]string, 0, len(tags))
	for k, v := range tags {
		m["aws:RequestTag/"+k] = []string{v}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	m["aws:TagKeys"] = keys
	return m
}

// resourceTags is the context of a resource's own tags: aws:ResourceTag/k
// and the service's own alias (ec2:ResourceTag/k, iam:ResourceTag/k).
func resourceTags(service string, tags map[string]string) map[string][]string {
	m := map[string][]string{}
	for k, v := range tags {
		m["aws:ResourceTag/"+k] = []string{v}
		if service == "ec2" || service == "iam" {
			m[service+":ResourceTag/"+k] = []string{v}
		}
	}
	return m
}

// authRequests are the authorizations call c needs.
func (f *front) authRequests(ctx context.Context, c *call, p *principal) ([]AuthRequest, error) {
	a := newAuthContext(c, p)
	var err error
	switch c.Service {
	case "ec2":
		err = f.ec2Auth(ctx, a, c)
	case "iam":
		err = f.iamAuth(ctx, a, c)
	case "ssm":
		err = ssmAuth(a, c)
	case "sqs":
		err = sqsAuth(a, c)
	case "eks":
		eksAuth(a, c)
	case "arc-zonal-shift":
		zonalShiftAuth(a, c)
	case "sts":
		if c.Action != "GetCallerIdentity" { // every identity may ask who it is
			a.add("sts:"+c.Action, "*")
		}
	default:
		a.add(c.Service+":"+c.Action, "*")
	}
	return a.out, err
}

// --- EC2 ---

func (f *front) ec2Auth(ctx context.Context, a *authContext, c *call) error {
	action := "ec2:" + c.Action
	switch c.Action {
	case "CreateTags", "DeleteTags":
		ids := ec2List(c.Form, "ResourceId")
		tags, err := f.ec2TagsOf(ctx, c.Region, ids)
		if err != nil {
			return err
		}
		req := formTags(c.Form, "Tag")
		for _, id := range ids {
			typ := ec2TypeOf(id)
			if _, ok := tags[id]; !ok && typ == "instance" {
				continue // an unknown instance: EC2 answers NotFound
			}
			if c.Action == "DeleteTags" {
				keys := make([]string, 0, len(req))
				for k := range req {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				a.add(action, ec2ARN(c.Region, typ, id), resourceTags("ec2", tags[id]), map[string][]string{"aws:TagKeys": keys})
				continue
			}
			a.add(action, ec2ARN(c.Region, typ, id), resourceTags("ec2", tags[id]), requestTags(req))
		}
	case "TerminateInstances", "StopInstances", "StartInstances", "RebootInstances":
		ids := ec2List(c.Form, "InstanceId")
		tags, err := f.ec2TagsOf(ctx, c.Region, ids)
		if err != nil {
			return err
		}
		for _, id := range ids {
			if t, ok := tags[id]; ok {
				a.add(action, ec2ARN(c.Region, "instance", id), resourceTags("ec2", t))
			}
		}
	case "CreateLaunchTemplate":
		tags := tagSpecs(c.Form, "TagSpecification")["launch-template"]
		a.add(action, ec2ARN(c.Region, "launch-template", "*"), requestTags(tags))
		if len(tags) > 0 {
			a.add("ec2:CreateTags", ec2ARN(c.Region, "launch-template", "*"), requestTags(tags),
				map[string][]string{"ec2:CreateAction": {"CreateLaunchTemplate"}})
		}
	case "DeleteLaunchTemplate", "CreateLaunchTemplateVersion", "ModifyLaunchTemplate", "DeleteLaunchTemplateVersions":
		id, tags, found, err := f.launchTemplateTags(ctx, c.Region, c.Form.Get("LaunchTemplateId"), c.Form.Get("LaunchTemplateName"))
		if err != nil {
			return err
		}
		if found {
			a.add(action, ec2ARN(c.Region, "launch-template", id), resourceTags("ec2", tags))
		}
	case "CreatePlacementGroup":
		// The group's ARN names it; its tags are request tags.
		tags := tagSpecs(c.Form, "TagSpecification")["placement-group"]
		arn := ec2ARN(c.Region, "placement-group", c.Form.Get("GroupName"))
		a.add(action, arn, requestTags(tags))
		if len(tags) > 0 {
			a.add("ec2:CreateTags", arn, requestTags(tags), map[string][]string{"ec2:CreateAction": {"CreatePlacementGroup"}})
		}
	case "DeletePlacementGroup":
		name := c.Form.Get("GroupName")
		a.add(action, ec2ARN(c.Region, "placement-group", name), resourceTags("ec2", f.placementGroupTags(c.Region, name)))
	case "CreateFleet":
		return f.fleetAuth(ctx, a, c)
	case "RunInstances":
		return f.runInstancesAuth(ctx, a, c)
	default:
		// Describe*, Get* and the other actions without resource-level
		// permissions for the controller's use.
		a.add(action, "*")
	}
	return nil
}

// formTags reads prefix.N.Key / prefix.N.Value.
func formTags(form url.Values, prefix string) map[string]string {
	out := map[string]string{}
	for _, n := range listIndexes(form, prefix) {
		k := form.Get(fmt.Sprintf("%s.%d.Key", prefix, n))
		if k != "" {
			out[k] = form.Get(fmt.Sprintf("%s.%d.Value", prefix, n))
		}
	}
	return out
}

// tagSpecs reads prefix.N.ResourceType with its prefix.N.Tag.M, merged by
// resource type.
func tagSpecs(form url.Values, prefix string) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, n := range listIndexes(form, prefix) {
		p := fmt.Sprintf("%s.%d.", prefix, n)
		typ := form.Get(p + "ResourceType")
		if out[typ] == nil {
			out[typ] = map[string]string{}
		}
		for k, v := range formTags(form, p+"Tag") {
			out[typ][k] = v
		}
	}
	return out
}

// ec2TagsOf are the tags of the resources by id, as moto keeps them; an
// instance missing from the answer does not exist (other types without tags
// have an empty entry).
func (f *front) ec2TagsOf(ctx context.Context, region string, ids []string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	var instances, others []string
	for _, id := range ids {
		if ec2TypeOf(id) == "instance" {
			instances = append(instances, id)
		} else {
			others = append(others, id)
			out[id] = map[string]string{}
		}
	}
	if len(instances) > 0 {
		form := ec2Form("DescribeInstances", "Filter.1.Name", "instance-id")
		for i, id := range instances {
			form.Set(fmt.Sprintf("Filter.1.Value.%d", i+1), id)
		}
		doc, err := f.motoXML(ctx, region, form)
		if err != nil {
			return nil, fmt.Errorf("looking up the tags of %s: %w", strings.Join(instances, ", "), err)
		}
		for _, r := range doc.items("reservationSet") {
			for _, inst := range r.items("instancesSet") {
				out[inst.text("instanceId")] = tagSet(inst)
			}
		}
	}
	if len(others) > 0 {
		form := ec2Form("DescribeTags", "Filter.1.Name", "resource-id")
		for i, id := range others {
			form.Set(fmt.Sprintf("Filter.1.Value.%d", i+1), id)
		}
		doc, err := f.motoXML(ctx, region, form)
		if err != nil {
			return nil, fmt.Errorf("looking up the tags of %s: %w", strings.Join(others, ", "), err)
		}
		for _, it := range doc.items("tagSet") {
			if m := out[it.text("resourceId")]; m != nil {
				m[it.text("key")] = it.text("value")
			}
		}
	}
	return out, nil
}

// tagSet reads an element's <tagSet>.
func tagSet(n *xnode) map[string]string {
	out := map[string]string{}
	for _, t := range n.items("tagSet") {
		out[t.text("key")] = t.text("value")
	}
	return out
}

// launchTemplateTags finds a launch template by id or name: its id and
// tags; found is false when moto has none.
func (f *front) launchTemplateTags(ctx context.Context, region, id, name string) (string, map[string]string, bool, error) {
	form := ec2Form("DescribeLaunchTemplates")
	if id != "" {
		form.Set("LaunchTemplateId.1", id)
	} else if name != "" {
		form.Set("LaunchTemplateName.1", name)
	} else {
		return "", nil, false, nil
	}
	status, body, err := f.motoRaw(ctx, region, form)
	if err != nil {
		return "", nil, false, err
	}
	if status != 200 {
		return "", nil, false, nil
	}
	doc, err := parseXML(body)
	if err != nil {
		return "", nil, false, err
	}
	items := doc.items("launchTemplates")
	if len(items) == 0 {
		return "", nil, false, nil
	}
	return items[0].text("launchTemplateId"), tagSet(items[0]), true, nil
}

// templateAuth is what a launch's authorization reads from its launch
// template version.
type templateAuth struct {
	ID             string
	Tags           map[string]string
	ImageID        string
	SecurityGroups []string
	Profile        string // name, or the last segment of its ARN
	Reservation    string
	PlacementGroup string
	// Specs are the version's tag specifications by resource type.
	Specs map[string]map[string]string
}

// templateFor is templateForAuth read once per call (two moto calls each):
// a launch's authorization, limits and consistency checks all read the
// template it names, as EC2 resolves it once. Each caller gets its own
// copy to amend.
func (f *front) templateFor(ctx context.Context, c *call, id, name, version string) (*templateAuth, error) {
	key := id + "\x00" + name + "\x00" + version
	t, ok := c.templates[key]
	if !ok {
		var err error
		if t, err = f.templateForAuth(ctx, c.Region, id, name, version); err != nil {
			return nil, err
		}
		if c.templates == nil {
			c.templates = map[string]*templateAuth{}
		}
		c.templates[key] = t
	}
	if t == nil {
		return nil, nil
	}
	cp := *t
	cp.SecurityGroups = slices.Clip(cp.SecurityGroups)
	return &cp, nil
}

func (f *front) templateForAuth(ctx context.Context, region, id, name, version string) (*templateAuth, error) {
	ltID, tags, found, err := f.launchTemplateTags(ctx, region, id, name)
	if err != nil || !found {
		return nil, err
	}
	form := ec2Form("DescribeLaunchTemplateVersions", "LaunchTemplateId", ltID)
	if version == "" {
		version = "$Default"
	}
	form.Set("LaunchTemplateVersion.1", version)
	status, body, err := f.motoRaw(ctx, region, form)
	if err != nil {
		return nil, err
	}
	if status != 200 {
		return nil, nil
	}
	doc, err := parseXML(body)
	if err != nil {
		return nil, err
	}
	items := doc.items("launchTemplateVersionSet")
	if len(items) == 0 {
		return nil, nil
	}
	data := items[0].child("launchTemplateData")
	t := &templateAuth{ID: ltID, Tags: tags, ImageID: data.text("imageId"), Specs: map[string]map[string]string{},
		Reservation:    data.text("capacityReservationSpecification", "capacityReservationTarget", "capacityReservationId"),
		PlacementGroup: data.text("placement", "groupName")}
	if id := data.text("placement", "groupId"); t.PlacementGroup == "" && id != "" {
		// The group's ARN names it by name.
		t.PlacementGroup = f.placementGroupName(region, id)
	}
	for _, sg := range data.items("securityGroupIdSet") {
		t.SecurityGroups = append(t.SecurityGroups, sg.text())
	}
	for _, ni := range data.items("networkInterfaceSet") {
		for _, sg := range ni.items("groupSet") {
			t.SecurityGroups = append(t.SecurityGroups, sg.text())
		}
	}
	if name := data.text("iamInstanceProfile", "name"); name != "" {
		t.Profile = name
	} else if arn := data.text("iamInstanceProfile", "arn"); arn != "" {
		t.Profile = arn[strings.LastIndexByte(arn, '/')+1:]
	}
	for _, spec := range data.items("tagSpecificationSet") {
		typ := spec.text("resourceType")
		if t.Specs[typ] == nil {
			t.Specs[typ] = map[string]string{}
		}
		for k, v := range tagSet(spec) {
			t.Specs[typ][k] = v
		}
	}
	return t, nil
}

// launchAuth authorizes a launch as EC2 does for RunInstances and for the
// instances an instant fleet launches: the launch action(s) on each
// resource the launch uses (launch template, subnet, image, security
// groups, capacity reservation, placement group) and on each it creates
// (instance, volume, network interface) with that resource's tags as
// request tags; ec2:CreateTags for every created resource that gets tags,
// with ec2:CreateAction; and iam:PassRole for the instance profile's role.
type launchAuth struct {
	actions   []string
	create    string // ec2:CreateAction of the tags
	templates map[string]*templateAuth
	subnets   map[string]bool
	images    map[string]bool
	// requestSpecs are the call's own tag specifications by type.
	requestSpecs map[string]map[string]string
}

func (f *front) addLaunchAuth(ctx context.Context, a *authContext, l launchAuth) error {
	used := map[string]bool{}
	var usedIDs []string
	use := func(typ, id string) {
		if id == "" || used[typ+"/"+id] {
			return
		}
		used[typ+"/"+id] = true
		usedIDs = append(usedIDs, id)
	}
	var profiles []string
	for _, t := range l.templates {
		for _, sg := range t.SecurityGroups {
			use("security-group", sg)
		}
		use("capacity-reservation", t.Reservation)
		if t.Profile != "" {
			profiles = append(profiles, t.Profile)
		}
	}
	for id := range l.subnets {
		use("subnet", id)
	}
	for id := range l.images {
		use("image", id)
	}
	sort.Strings(usedIDs)
	tags, err := f.ec2TagsOf(ctx, a.region, usedIDs)
	if err != nil {
		return err
	}
	for _, id := range usedIDs {
		typ := ec2TypeOf(id)
		t := tags[id]
		if typ == "capacity-reservation" {
			t = f.reservationTags(id)
		}
		for _, act := range l.actions {
			a.add(act, ec2ARN(a.region, typ, id), resourceTags("ec2", t))
		}
	}
	ids := make([]string, 0, len(l.templates))
	for id := range l.templates {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		t := l.templates[id]
		for _, act := range l.actions {
			a.add(act, ec2ARN(a.region, "launch-template", id), resourceTags("ec2", t.Tags))
			if t.PlacementGroup != "" {
				a.add(act, ec2ARN(a.region, "placement-group", t.PlacementGroup), resourceTags("ec2", f.placementGroupTags(a.region, t.PlacementGroup)))
			}
		}
		for _, typ := range []string{"instance", "volume", "network-interface"} {
			tags := map[string]string{}
			for k, v := range t.Specs[typ] {
				tags[k] = v
			}
			for k, v := range l.requestSpecs[typ] {
				tags[k] = v
			}
			for _, act := range l.actions {
				a.add(act, ec2ARN(a.region, typ, "*"), requestTags(tags))
			}
			if len(tags) > 0 {
				a.add("ec2:CreateTags", ec2ARN(a.region, typ, "*"), requestTags(tags),
					map[string][]string{"ec2:CreateAction": {l.create}})
			}
		}
	}
	sort.Strings(profiles)
	seen := map[string]bool{}
	for _, name := range profiles {
		if seen[name] {
			continue
		}
		seen[name] = true
		roles, err := f.profileRoles(ctx, a.region, name)
		if err != nil {
			return err
		}
		for _, role := range roles {
			a.add("iam:PassRole", role, map[string][]string{"iam:PassedToService": {"ec2.amazonaws.com"}})
		}
	}
	return nil
}

func (f *front) reservationTags(id string) map[string]string {
	s := f.ec2
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	if r := s.reservations[id]; r != nil {
		for k, v := range r.Tags {
			out[k] = v
		}
	}
	return out
}

// fleetAuth: ec2:CreateFleet on the fleet with its tags, then the launch
// of its instances (instant fleets launch with the caller's permissions,
// so ec2:RunInstances is authorized beside ec2:CreateFleet).
func (f *front) fleetAuth(ctx context.Context, a *authContext, c *call) error {
	specs := tagSpecs(c.Form, "TagSpecification")
	a.add("ec2:CreateFleet", ec2ARN(c.Region, "fleet", "*"), requestTags(specs["fleet"]))
	if len(specs["fleet"]) > 0 {
		a.add("ec2:CreateTags", ec2ARN(c.Region, "fleet", "*"), requestTags(specs["fleet"]),
			map[string][]string{"ec2:CreateAction": {"CreateFleet"}})
	}
	l := launchAuth{actions: []string{"ec2:CreateFleet", "ec2:RunInstances"}, create: "CreateFleet",
		templates: map[string]*templateAuth{}, subnets: map[string]bool{}, images: map[string]bool{}, requestSpecs: specs}
	for _, n := range listIndexes(c.Form, "LaunchTemplateConfigs") {
		p := fmt.Sprintf("LaunchTemplateConfigs.%d.", n)
		t, err := f.templateFor(ctx, c, c.Form.Get(p+"LaunchTemplateSpecification.LaunchTemplateId"),
			c.Form.Get(p+"LaunchTemplateSpecification.LaunchTemplateName"), c.Form.Get(p+"LaunchTemplateSpecification.Version"))
		if err != nil {
			return err
		}
		if t == nil {
			continue // the fleet reports the missing template per override
		}
		l.templates[t.ID] = t
		overrides := listIndexes(c.Form, p+"Overrides")
		templateImage := len(overrides) == 0
		for _, m := range overrides {
			q := fmt.Sprintf("%sOverrides.%d.", p, m)
			if id := c.Form.Get(q + "SubnetId"); id != "" {
				l.subnets[id] = true
			}
			if id := c.Form.Get(q + "ImageId"); id != "" {
				l.images[id] = true
			} else {
				templateImage = true
			}
		}
		if templateImage && t.ImageID != "" {
			l.images[t.ImageID] = true
		}
	}
	return f.addLaunchAuth(ctx, a, l)
}

func (f *front) runInstancesAuth(ctx context.Context, a *authContext, c *call) error {
	l := launchAuth{actions: []string{"ec2:RunInstances"}, create: "RunInstances", templates: map[string]*templateAuth{},
		subnets: map[string]bool{}, images: map[string]bool{}, requestSpecs: tagSpecs(c.Form, "TagSpecification")}
	t, err := f.templateFor(ctx, c, c.Form.Get("LaunchTemplate.LaunchTemplateId"), c.Form.Get("LaunchTemplate.LaunchTemplateName"), c.Form.Get("LaunchTemplate.Version"))
	if err != nil {
		return err
	}
	if t == nil {
		// No template: the call's own parameters describe the launch.
		t = &templateAuth{Specs: map[string]map[string]string{}}
	}
	if id := c.Form.Get("ImageId"); id != "" {
		t.ImageID = id
	}
	t.SecurityGroups = append(t.SecurityGroups, ec2List(c.Form, "SecurityGroupId")...)
	if name := c.Form.Get("IamInstanceProfile.Name"); name != "" {
		t.Profile = name
	} else if arn := c.Form.Get("IamInstanceProfile.Arn"); arn != "" {
		t.Profile = arn[strings.LastIndexByte(arn, '/')+1:]
	}
	if t.ImageID != "" {
		l.images[t.ImageID] = true
	}
	if id := c.Form.Get("SubnetId"); id != "" {
		l.subnets[id] = true
	}
	if t.ID == "" {
		// addLaunchAuth keys the created resources by template.
		t.ID = "*"
		l.templates["*"] = t
		err := f.addLaunchAuth(ctx, a, l)
		// The launch template "*" is not a resource the call used.
		kept := a.out[:0]
		for _, r := range a.out {
			if r.Resource != ec2ARN(a.region, "launch-template", "*") {
				kept = append(kept, r)
			}
		}
		a.out = kept
		return err
	}
	l.templates[t.ID] = t
	return f.addLaunchAuth(ctx, a, l)
}

// profileRoles are the ARNs of the roles in the named instance profile.
func (f *front) profileRoles(ctx context.Context, region, name string) ([]string, error) {
	prof, found, err := f.instanceProfile(ctx, region, name)
	if err != nil || !found {
		return nil, err
	}
	return prof.roles, nil
}

// --- IAM ---

type iamProfile struct {
	arn   string
	tags  map[string]string
	roles []string
}

// members are the <member> children of the descendant at names.
func members(n *xnode, names ...string) []*xnode {
	c := n.path(names...)
	if c == nil {
		return nil
	}
	var out []*xnode
	for _, it := range c.Children {
		if it.Name == "member" {
			out = append(out, it)
		}
	}
	return out
}

func (f *front) instanceProfile(ctx context.Context, region, name string) (iamProfile, bool, error) {
	body, err := f.motoCall(ctx, "iam", region, url.Values{"Action": {"GetInstanceProfile"}, "Version": {"2010-05-08"}, "InstanceProfileName": {name}})
	if err != nil {
		if _, notFound := err.(*motoStatusError); notFound {
			return iamProfile{}, false, nil
		}
		return iamProfile{}, false, err
	}
	doc, err := parseXML(body)
	if err != nil {
		return iamProfile{}, false, err
	}
	ip := doc.path("GetInstanceProfileResult", "InstanceProfile")
	out := iamProfile{arn: ip.text("Arn"), tags: map[string]string{}}
	for _, t := range members(ip, "Tags") {
		out.tags[t.text("Key")] = t.text("Value")
	}
	for _, r := range members(ip, "Roles") {
		out.roles = append(out.roles, r.text("Arn"))
	}
	return out, true, nil
}

func (f *front) roleARN(ctx context.Context, region, name string) (string, error) {
	body, err := f.motoCall(ctx, "iam", region, url.Values{"Action": {"GetRole"}, "Version": {"2010-05-08"}, "RoleName": {name}})
	if err != nil {
		if _, notFound := err.(*motoStatusError); notFound {
			return fmt.Sprintf("arn:aws:iam::%s:role/%s", AccountID, name), nil
		}
		return "", err
	}
	doc, err := parseXML(body)
	if err != nil {
		return "", err
	}
	return doc.text("GetRoleResult", "Role", "Arn"), nil
}

func iamTags(form url.Values) map[string]string {
	out := map[string]string{}
	for _, n := range listIndexes(form, "Tags.member") {
		k := form.Get(fmt.Sprintf("Tags.member.%d.Key", n))
		if k != "" {
			out[k] = form.Get(fmt.Sprintf("Tags.member.%d.Value", n))
		}
	}
	return out
}

func (f *front) iamAuth(ctx context.Context, a *authContext, c *call) error {
	action := "iam:" + c.Action
	profileARN := func(name string) string {
		return fmt.Sprintf("arn:aws:iam::%s:instance-profile/%s", AccountID, name)
	}
	switch c.Action {
	case "GetInstanceProfile", "DeleteInstanceProfile", "RemoveRoleFromInstanceProfile", "AddRoleToInstanceProfile",
		"TagInstanceProfile", "UntagInstanceProfile", "ListInstanceProfileTags":
		name := c.Form.Get("InstanceProfileName")
		prof, found, err := f.instanceProfile(ctx, c.Region, name)
		if err != nil {
			return err
		}
		arn := profileARN(name)
		if found {
			arn = prof.arn
		}
		extra := map[string][]string{}
		switch c.Action {
		case "TagInstanceProfile":
			extra = requestTags(iamTags(c.Form))
		case "UntagInstanceProfile":
			extra = map[string][]string{"aws:TagKeys": ec2List(c.Form, "TagKeys.member")}
		}
		a.add(action, arn, resourceTags("iam", prof.tags), extra)
		if c.Action == "AddRoleToInstanceProfile" {
			role, err := f.roleARN(ctx, c.Region, c.Form.Get("RoleName"))
			if err != nil {
				return err
			}
			a.add("iam:PassRole", role, map[string][]string{"iam:PassedToService": {"ec2.amazonaws.com"}})
		}
	case "CreateInstanceProfile":
		path := c.Form.Get("Path")
		if path == "" {
			path = "/"
		}
		arn := profileARN(strings.TrimPrefix(path, "/") + c.Form.Get("InstanceProfileName"))
		tags := iamTags(c.Form)
		a.add(action, arn, requestTags(tags))
		if len(tags) > 0 {
			// IAM authorizes tags given at creation as iam:TagInstanceProfile
			// too, the new profile carrying exactly those tags.
			a.add("iam:TagInstanceProfile", arn, requestTags(tags), resourceTags("iam", tags))
		}
	case "GetRole", "DeleteRole", "TagRole", "PassRole":
		role, err := f.roleARN(ctx, c.Region, c.Form.Get("RoleName"))
		if err != nil {
			return err
		}
		a.add(action, role)
	default:
		a.add(action, "*")
	}
	return nil
}

// --- SSM, SQS, EKS, ARC zonal shift ---

func ssmParameterARN(region, name string) string {
	if strings.HasPrefix(name, "/aws/service/") {
		// Public parameters belong to no account.
		return fmt.Sprintf("arn:aws:ssm:%s::parameter%s", region, name)
	}
	return fmt.Sprintf("arn:aws:ssm:%s:%s:parameter/%s", region, AccountID, strings.TrimPrefix(name, "/"))
}

func ssmAuth(a *authContext, c *call) error {
	var in struct {
		Name  string
		Names []string
		Path  string
	}
	if len(c.Body) > 0 {
		if err := json.Unmarshal(c.Body, &in); err != nil {
			return fmt.Errorf("reading %s: %w", c.Action, err)
		}
	}
	action := "ssm:" + c.Action
	switch {
	case in.Name != "":
		a.add(action, ssmParameterARN(c.Region, in.Name))
	case len(in.Names) > 0:
		for _, n := range in.Names {
			a.add(action, ssmParameterARN(c.Region, n))
		}
	case in.Path != "":
		a.add(action, ssmParameterARN(c.Region, in.Path))
	default:
		a.add(action, "*")
	}
	return nil
}

func sqsAuth(a *authContext, c *call) error {
	var in struct {
		QueueName string
		QueueUrl  string //nolint:revive // the wire name
	}
	if len(c.Body) > 0 {
		if err := json.Unmarshal(c.Body, &in); err != nil {
			return fmt.Errorf("reading %s: %w", c.Action, err)
		}
	}
	account, name := AccountID, in.QueueName
	if in.QueueUrl != "" {
		u, err := url.Parse(in.QueueUrl)
		if err != nil {
			return fmt.Errorf("queue URL %q: %w", in.QueueUrl, err)
		}
		parts := strings.Split(strings.Trim(u.Path, "/"), "/")
		if len(parts) == 2 {
			account, name = parts[0], parts[1]
		}
	}
	if name == "" {
		a.add("sqs:"+c.Action, "*")
		return nil
	}
	a.add("sqs:"+c.Action, fmt.Sprintf("arn:aws:sqs:%s:%s:%s", c.Region, account, name))
	return nil
}

// eksAuth maps EKS's REST calls: GET /clusters/{name} is DescribeCluster.
func eksAuth(a *authContext, c *call) {
	method, path, _ := strings.Cut(c.Action, " ")
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if method == "GET" && len(parts) == 2 && parts[0] == "clusters" {
		name, _ := url.PathUnescape(parts[1])
		a.add("eks:DescribeCluster", fmt.Sprintf("arn:aws:eks:%s:%s:cluster/%s", c.Region, AccountID, name))
		return
	}
	a.add("eks:"+c.Action, "*")
}

// zonalShiftAuth maps ARC zonal shift's GET /managedresources/{id}, whose
// permission is scoped by the resource identifier condition key.
func zonalShiftAuth(a *authContext, c *call) {
	method, path, _ := strings.Cut(c.Action, " ")
	rest, ok := strings.CutPrefix(path, "/managedresources/")
	if method == "GET" && ok {
		id, _ := url.PathUnescape(rest)
		a.add("arc-zonal-shift:GetManagedResource", "*", map[string][]string{"arc-zonal-shift:ResourceIdentifier": {id}})
		return
	}
	a.add("arc-zonal-shift:"+c.Action, "*")
}
