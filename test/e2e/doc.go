// Package e2e holds whole-system tests: they run the project's binaries
// against the real control plane that test/controlplane starts.
package e2e
