package bootstrap

import (
	"fmt"
	"strings"
)

// windows renders the PowerShell that runs the EKS-optimized Windows AMI's
// Start-EKSBootstrap.ps1, after the user's own PowerShell.
func (o resolved) windows() (string, error) {
	if err := o.validate(); err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("<powershell>\n")
	if custom := strings.TrimRight(o.customUserData(), "\r\n"); custom != "" {
		b.WriteString(custom + "\n")
	}
	b.WriteString(`[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\Amazon\EKS\Start-EKSBootstrap.ps1"` + "\n")
	fmt.Fprintf(&b, "& $EKSBootstrapScriptFile -EKSClusterName %s -APIServerEndpoint %s", powershellQuote(o.ClusterName), powershellQuote(o.ClusterEndpoint))
	if o.CABundle != "" {
		fmt.Fprintf(&b, " -Base64ClusterCA %s", powershellQuote(o.CABundle))
	}
	if args := o.kubeletExtraArgs(); len(args) > 0 {
		fmt.Fprintf(&b, " -KubeletExtraArgs %s", powershellQuote(strings.Join(args, " ")))
	}
	if len(o.kubelet.ClusterDNS) > 0 {
		fmt.Fprintf(&b, " -DNSClusterIP %s", powershellQuote(o.kubelet.ClusterDNS[0]))
	}
	b.WriteString("\n</powershell>")
	return b.String(), nil
}
