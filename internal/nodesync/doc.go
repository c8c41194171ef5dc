// Package nodesync mirrors the fake AWS's HyperPod and EKS instances into a local control plane as kwok nodes, so
// a capacity change HyperOps makes through the fake AWS shows up as nodes in the Kubernetes API. The end-to-end
// tier and the playground both use it.
package nodesync
