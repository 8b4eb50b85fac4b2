package bootstrap

import (
	"fmt"
	"strings"
)

// al2 renders AL2's /etc/eks/bootstrap.sh call as the last shell part of a
// MIME multipart document; the user's data comes first (its parts copied
// when it is MIME, else wrapped as one shell script).
func (o resolved) al2() (string, error) {
	var parts []Part
	if custom := o.customUserData(); custom != "" {
		userParts, err := userMIMEParts(custom)
		if err != nil {
			return "", err
		}
		parts = append(parts, userParts...)
	}
	parts = append(parts, newPart(ContentTypeShellScript, o.bootstrapSh()))
	return WriteMIME(parts)
}

// userMIMEParts reads the user's data as MIME parts, or wraps plain data
// as a single shell script part.
func userMIMEParts(custom string) ([]Part, error) {
	if !IsMIME(custom) {
		return []Part{newPart(ContentTypeShellScript, custom)}, nil
	}
	parts, err := ParseMIME(custom)
	if err != nil {
		return nil, fmt.Errorf("parsing custom user data: %w", err)
	}
	return parts, nil
}

func (o resolved) bootstrapSh() string {
	var b strings.Builder
	b.WriteString("#!/bin/bash -xe\n")
	b.WriteString("exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n")
	// bootstrap.sh parses "--flag value", never "--flag=value".
	fmt.Fprintf(&b, "/etc/eks/bootstrap.sh %s --apiserver-endpoint %s", shellQuote(o.ClusterName), shellQuote(o.ClusterEndpoint))
	if o.CABundle != "" {
		fmt.Fprintf(&b, " --b64-cluster-ca %s", shellQuote(o.CABundle))
	}
	if o.kubelet.ipv6() {
		b.WriteString(" \\\n--ip-family ipv6")
	}
	if len(o.kubelet.ClusterDNS) > 0 {
		fmt.Fprintf(&b, " \\\n--dns-cluster-ip %s", shellQuote(o.kubelet.ClusterDNS[0]))
	}
	// An explicit max-pods must not be overridden by the AMI's ENI table.
	if o.kubelet.MaxPods != nil {
		b.WriteString(" \\\n--use-max-pods false")
	}
	if args := o.kubeletExtraArgs(); len(args) > 0 {
		fmt.Fprintf(&b, " \\\n--kubelet-extra-args %s", shellQuote(strings.Join(args, " ")))
	}
	if o.raid0() {
		b.WriteString(" \\\n--local-disks raid0")
	}
	return b.String()
}
