package kube

import (
	"errors"
	"strings"
	"testing"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

func TestCheckImageRefusesNonReferencesBeforeGlobs(t *testing.T) {
	// A glob that would match anything under the registry, hostile text included.
	cl := &config.Cluster{Name: "c", Images: []string{"123456789012.dkr.ecr.us-west-2.amazonaws.com/*"}}
	reg := "123456789012.dkr.ecr.us-west-2.amazonaws.com/"
	tests := []struct {
		image string
		code  ops.Code
	}{
		{reg + "trainer:v17", ""},
		{reg + "trainer@sha256:" + strings.Repeat("a", 64), ""},
		{"localhost:5000/x/y:latest", ops.CodeImageNotAllowed},
		{"public.ecr.aws/docker/library/busybox:1.36", ops.CodeImageNotAllowed},
		{reg + "<!channel>", ops.CodeInvalidArgument},
		{reg + "x <@U123>", ops.CodeInvalidArgument},
		{reg + "<https://evil|click>", ops.CodeInvalidArgument},
		{reg + "x`y", ops.CodeInvalidArgument},
		{reg + "x\nkind: Pod", ops.CodeInvalidArgument},
		{reg + "x\x00", ops.CodeInvalidArgument},
		{reg + strings.Repeat("a", 5000), ops.CodeInvalidArgument},
		{reg + "Trainer:v1", ops.CodeInvalidArgument},
		{reg + "*", ops.CodeInvalidArgument},
	}
	for _, tc := range tests {
		err := checkImage(cl, tc.image)
		var e *ops.Error
		switch {
		case tc.code == "" && err != nil:
			t.Errorf("%.60q refused: %v", tc.image, err)
		case tc.code != "" && (!errors.As(err, &e) || e.Code != tc.code || e.Field != "image"):
			t.Errorf("%.60q: %v, want %s on image", tc.image, err, tc.code)
		}
	}
}
