// Package kubernetes holds no code: its tests check the manifests under
// deploy/kubernetes (docs/kubernetes.md). They decode every YAML document
// strictly into the Kubernetes API type its apiVersion and kind name, check
// that probes, selectors, Secrets and resources agree with each other and
// with the docs, and run the tern binary built from this repository with
// each tern container's arguments and environment and --print-config.
//
// It is a module of its own so that the main module does not depend on
// k8s.io/api.
package kubernetes
