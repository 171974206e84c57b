// Package monitoring holds the tests of Tern's dashboards and alerts
// (deploy/grafana, deploy/prometheus): every panel query and rule
// expression parses as PromQL, every alert has a summary and a runbook
// section in docs/operations.md, and every metric they use is exported by
// a real tern serve, standalone and in a cluster. It is a module of its
// own, so that the main module does not depend on Prometheus's.
package monitoring
