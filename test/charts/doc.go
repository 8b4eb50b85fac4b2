// Package charts tests the Helm charts in charts/ with the helm binary that
// `make tools` builds: lint, a golden rendering of the defaults, the values
// of the documented install command reaching the controller's environment
// (and parsing there), the CRDs matching the generated ones, and install,
// upgrade and uninstall against a real kube-apiserver. It has no code of its
// own outside the tests.
package charts
