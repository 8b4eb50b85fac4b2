package awslocal

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// EC2's and IAM's eventual consistency, as principals see it: an instance
// is missing from DescribeInstances, and unknown to the calls that name it,
// for a while after its launch; a launch template likewise after its
// creation; an instance profile cannot be used by a launch for a while
// after it is created or gets its role. The account's root key sees the
// strongly consistent state (it is the tests' own view).

// ConsistencyOptions set the delays; the zero value uses the defaults.
type ConsistencyOptions struct {
	// Disabled makes every change visible at once.
	Disabled bool
	// InstanceDelay is how long after its launch an instance stays
	// unknown; 0 means DefaultInstanceDelay.
	InstanceDelay time.Duration
	// InstanceProfileDelay is how long after its creation, or after a role
	// is added to it, a launch refuses an instance profile; 0 means
	// DefaultInstanceProfileDelay.
	InstanceProfileDelay time.Duration
	// LaunchTemplateDelay is how long after its creation a launch template
	// stays unknown; 0 means DefaultLaunchTemplateDelay.
	LaunchTemplateDelay time.Duration
}

// The default delays: EC2 usually settles in a second or two; IAM takes
// several seconds to propagate an instance profile to EC2.
const (
	DefaultInstanceDelay        = 2 * time.Second
	DefaultInstanceProfileDelay = 6 * time.Second
	DefaultLaunchTemplateDelay  = time.Second
)

type consistency struct {
	opts      ConsistencyOptions
	mu        sync.Mutex
	instances map[string]time.Time // id → visible at
	templates map[string]time.Time // id and name → visible at
	profiles  map[string]time.Time // name → usable at
}

func newConsistency(o ConsistencyOptions) *consistency {
	if o.InstanceDelay == 0 {
		o.InstanceDelay = DefaultInstanceDelay
	}
	if o.InstanceProfileDelay == 0 {
		o.InstanceProfileDelay = DefaultInstanceProfileDelay
	}
	if o.LaunchTemplateDelay == 0 {
		o.LaunchTemplateDelay = DefaultLaunchTemplateDelay
	}
	return &consistency{opts: o, instances: map[string]time.Time{}, templates: map[string]time.Time{}, profiles: map[string]time.Time{}}
}

func (s *consistency) note(m map[string]time.Time, d time.Duration, keys ...string) {
	if s.opts.Disabled {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	at := time.Now().Add(d)
	for _, k := range keys {
		if k != "" {
			m[k] = at
		}
	}
}

// launched notes instances that just launched.
func (s *consistency) launched(ids ...string) { s.note(s.instances, s.opts.InstanceDelay, ids...) }

// pending reports whether key is still invisible, forgetting it once it is
// not.
func (s *consistency) pending(m map[string]time.Time, key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := m[key]
	if !ok {
		return false
	}
	if time.Now().Before(at) {
		return true
	}
	delete(m, key)
	return false
}

func (s *consistency) anyPending(m map[string]time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for k, at := range m {
		if now.Before(at) {
			return true
		}
		delete(m, k)
	}
	return false
}

// observe notes what a successful moto answer created.
func (f *front) observe(c *call, resp *http.Response) {
	s := f.consist
	if s.opts.Disabled || resp.StatusCode != http.StatusOK {
		return
	}
	switch {
	case c.Service == "ec2" && c.Action == "RunInstances", c.Service == "ec2" && c.Action == "CreateLaunchTemplate":
	case c.Service == "iam" && (c.Action == "CreateInstanceProfile" || c.Action == "AddRoleToInstanceProfile"):
		s.note(s.profiles, s.opts.InstanceProfileDelay, c.Form.Get("InstanceProfileName"))
		return
	default:
		return
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return
	}
	doc, err := parseXML(body)
	if err != nil {
		return
	}
	if c.Action == "RunInstances" {
		for _, it := range doc.items("instancesSet") {
			s.launched(it.text("instanceId"))
		}
		return
	}
	s.note(s.templates, s.opts.LaunchTemplateDelay, doc.text("launchTemplate", "launchTemplateId"), "name/"+doc.text("launchTemplate", "launchTemplateName"))
}

func notFoundInstances(ids []string) (string, string) {
	if len(ids) == 1 {
		return "InvalidInstanceID.NotFound", fmt.Sprintf("The instance ID '%s' does not exist", ids[0])
	}
	return "InvalidInstanceID.NotFound", fmt.Sprintf("The instance IDs '%s' do not exist", strings.Join(ids, ", "))
}

// templateRefusal is EC2's answer for a launch template the caller cannot
// see yet, by id or name.
func (s *consistency) templateRefusal(id, name string) (string, string) {
	switch {
	case id != "" && s.pending(s.templates, id):
		return "InvalidLaunchTemplateId.NotFound", fmt.Sprintf("The specified launch template, with template ID %s, does not exist.", id)
	case id == "" && name != "" && s.pending(s.templates, "name/"+name):
		return "InvalidLaunchTemplateName.NotFoundException", fmt.Sprintf("The specified launch template, with template name %s, does not exist.", name)
	}
	return "", ""
}

// profileRefusal is EC2's answer for a launch naming an instance profile
// IAM has not propagated yet.
func (s *consistency) profileRefusal(name, arn string) (string, string) {
	param, value := "iamInstanceProfile.name", name
	if name == "" {
		if arn == "" {
			return "", ""
		}
		param, value, name = "iamInstanceProfile.arn", arn, arn[strings.LastIndexByte(arn, '/')+1:]
	}
	if !s.pending(s.profiles, name) {
		return "", ""
	}
	kind := "name"
	if param == "iamInstanceProfile.arn" {
		kind = "ARN"
	}
	return "InvalidParameterValue", fmt.Sprintf("Value (%s) for parameter %s is invalid. Invalid IAM Instance Profile %s", value, param, kind)
}

// launchRefusal applies to each launch template of a principal's fleet:
// the template itself, then its instance profile.
func (s *consistency) launchRefusal(cfg fleetConfig, lt *launchTemplate) (string, string) {
	if code, msg := s.templateRefusal(cfg.LTID, cfg.LTName); code != "" {
		return code, msg
	}
	return s.profileRefusal(lt.ProfileName, lt.ProfileArn)
}

// refuse answers a principal's call that names something it cannot see
// yet; false means the call goes on.
func (f *front) refuseUnseen(ctx context.Context, w http.ResponseWriter, c *call) bool {
	s := f.consist
	if s.opts.Disabled || c.Service != "ec2" {
		return false
	}
	var ids []string
	switch c.Action {
	case "CreateTags", "DeleteTags":
		ids = ec2List(c.Form, "ResourceId")
	case "DescribeInstances", "DescribeInstanceStatus", "TerminateInstances", "StopInstances", "StartInstances",
		"RebootInstances", "ModifyInstanceAttribute", "ModifyInstanceMetadataOptions", "GetConsoleOutput":
		ids = ec2List(c.Form, "InstanceId")
		if id := c.Form.Get("InstanceId"); id != "" {
			ids = append(ids, id)
		}
	case "DescribeLaunchTemplates":
		for _, id := range ec2List(c.Form, "LaunchTemplateId") {
			if code, msg := s.templateRefusal(id, ""); code != "" {
				writeError(w, c, http.StatusBadRequest, code, msg)
				return true
			}
		}
		for _, name := range ec2List(c.Form, "LaunchTemplateName") {
			if code, msg := s.templateRefusal("", name); code != "" {
				writeError(w, c, http.StatusBadRequest, code, msg)
				return true
			}
		}
		return false
	case "RunInstances":
		code, msg := s.templateRefusal(c.Form.Get("LaunchTemplate.LaunchTemplateId"), c.Form.Get("LaunchTemplate.LaunchTemplateName"))
		if code == "" {
			code, msg = s.profileRefusal(c.Form.Get("IamInstanceProfile.Name"), c.Form.Get("IamInstanceProfile.Arn"))
		}
		if code == "" && c.Form.Get("IamInstanceProfile.Name") == "" && c.Form.Get("IamInstanceProfile.Arn") == "" {
			if t, err := f.templateFor(ctx, c, c.Form.Get("LaunchTemplate.LaunchTemplateId"), c.Form.Get("LaunchTemplate.LaunchTemplateName"), c.Form.Get("LaunchTemplate.Version")); err == nil && t != nil {
				code, msg = s.profileRefusal(t.Profile, "")
			}
		}
		if code != "" {
			writeError(w, c, http.StatusBadRequest, code, msg)
			return true
		}
		return false
	default:
		return false
	}
	var unseen []string
	for _, id := range ids {
		if strings.HasPrefix(id, "i-") && s.pending(s.instances, id) {
			unseen = append(unseen, id)
		}
	}
	if len(unseen) == 0 {
		return false
	}
	code, msg := notFoundInstances(unseen)
	writeError(w, c, http.StatusBadRequest, code, msg)
	return true
}

// hideUnseenInstances drops from a DescribeInstances answer the instances a
// principal cannot see yet, and the reservations left empty.
func (f *front) hideUnseenInstances(doc *xnode) {
	set := doc.child("reservationSet")
	if set == nil {
		return
	}
	kept := set.Children[:0]
	for _, r := range set.Children {
		insts := r.child("instancesSet")
		if insts != nil {
			left := insts.Children[:0]
			for _, it := range insts.Children {
				if !f.consist.pending(f.consist.instances, it.text("instanceId")) {
					left = append(left, it)
				}
			}
			insts.Children = left
			if len(left) == 0 {
				continue
			}
		}
		kept = append(kept, r)
	}
	set.Children = kept
}

// describeLaunchTemplates hides from a principal the launch templates it
// cannot see yet.
func (f *front) describeLaunchTemplates(ctx context.Context, w http.ResponseWriter, c *call) bool {
	if c.Principal == nil || !f.consist.anyPending(f.consist.templates) {
		return false
	}
	status, body, err := f.motoRaw(ctx, c.Region, c.Form)
	if err != nil || status != http.StatusOK {
		return false
	}
	doc, err := parseXML(body)
	if err != nil {
		return false
	}
	if set := doc.child("launchTemplates"); set != nil {
		kept := set.Children[:0]
		for _, it := range set.Children {
			if !f.consist.pending(f.consist.templates, it.text("launchTemplateId")) {
				kept = append(kept, it)
			}
		}
		set.Children = kept
	}
	writeXML(w, doc.bytes())
	return true
}
