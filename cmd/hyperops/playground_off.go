//go:build noplayground

package main

import (
	"fmt"
	"io"
)

// cmdPlayground in a build without the playground (the container image: it would ship the fake Slack, the fake AWS
// and the control-plane launcher to production) says where to find it.
func cmdPlayground(_ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "hyperops playground: this binary was built without the playground (-tags noplayground, as the container image is);"+
		" run `make playground` from a checkout of the repository instead")
	return 1
}
