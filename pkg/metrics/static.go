package metrics

// OverprovisionedReason is the karpenter_nodeclaims_disrupted_total reason
// of a static NodePool's surplus NodeClaims after its replicas were lowered.
const OverprovisionedReason = "overprovisioned"
