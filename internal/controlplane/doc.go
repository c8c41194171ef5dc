// Package controlplane starts a real, local Kubernetes control plane for end-to-end tests:
// etcd, kube-apiserver (RBAC, token file, service-account keys), kube-controller-manager,
// kube-scheduler and kwok simulating HyperPod-like GPU nodes, all on loopback in a temp dir.
package controlplane
