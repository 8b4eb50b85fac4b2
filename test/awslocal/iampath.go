package awslocal

import (
	"context"
	"net/http"
	"strings"
)

// addIAMPathHandlers makes the IAM list actions honour PathPrefix, which
// moto ignores: Karpenter finds a cluster's and a class's instance
// profiles by their path, and a list that returns every profile would let
// a finalizer or the garbage collector delete another cluster's.
func (f *front) addIAMPathHandlers() {
	f.handlers[callKey{"iam", "ListInstanceProfiles"}] = f.listByPathPrefix("ListInstanceProfilesResult", "InstanceProfiles")
	f.handlers[callKey{"iam", "ListRoles"}] = f.listByPathPrefix("ListRolesResult", "Roles")
}

// listByPathPrefix asks moto for the whole list and keeps the members of
// result/set whose Path starts with the call's PathPrefix.
func (f *front) listByPathPrefix(result, set string) handler {
	return func(ctx context.Context, w http.ResponseWriter, c *call) bool {
		prefix := c.Form.Get("PathPrefix")
		if prefix == "" {
			return false
		}
		form := cloneValues(c.Form)
		form.Del("PathPrefix")
		body, err := f.motoCall(ctx, c.Service, c.Region, form)
		if err != nil {
			return false // the normal path answers moto's error as IAM would
		}
		doc, err := parseXML(body)
		if err != nil {
			return false
		}
		members := doc.path(result, set)
		if members == nil {
			return false
		}
		kept := members.Children[:0]
		for _, m := range members.Children {
			if strings.HasPrefix(m.text("Path"), prefix) {
				kept = append(kept, m)
			}
		}
		members.Children = kept
		writeXML(w, doc.bytes())
		return true
	}
}
