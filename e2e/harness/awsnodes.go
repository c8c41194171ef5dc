package harness

import "github.com/hyperops/hyperops/internal/nodesync"

// NodeSync mirrors the fake AWS's instances into the control plane (see nodesync.NodeSync).
type NodeSync = nodesync.NodeSync

// NewNodeSync returns a NodeSync that writes to plane.
var NewNodeSync = nodesync.New

// GPUsPerInstance is the nvidia.com/gpu capacity of the instance types the scenarios use.
var GPUsPerInstance = nodesync.GPUsPerInstance
