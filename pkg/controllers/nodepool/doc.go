// Package nodepool holds the tests that run the NodePool controllers
// together on the real control plane. The controllers live in the
// subpackages counter (status.resources and status.nodes), readiness
// (NodeClassReady), validation (ValidationSucceeded), registrationhealth
// (NodeRegistrationHealthy) and hash (the nodepool-hash annotation); the
// Ready roll-up they share is NodePool.SetCondition in pkg/apis/v1.
package nodepool
