package provisioning

// TriggerKey exposes the batcher key a pod triggers with.
var TriggerKey = (*Provisioner).triggerKey
