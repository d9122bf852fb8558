// Package check validates vigil's deployment artefacts (deploy/): the Helm chart rendered in
// both modes, the Prometheus alerting rules and the compose file. It is a module of its own so
// that Helm, kubeconform and Prometheus's rule parser stay out of vigil's go.mod; its tests
// run in CI (make package-check).
package check
